package memorystore

import (
	"testing"
	"unsafe"
)

func TestShardSize(t *testing.T) {
	if got := unsafe.Sizeof(shard[string]{}); got != 128 {
		t.Errorf("unsafe.Sizeof(shard) = %d, want 128: two cache lines", got)
	}
}
