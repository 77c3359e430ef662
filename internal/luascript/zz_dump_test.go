package luascript

import (
	"os"
	"testing"

	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func TestZZDump(t *testing.T) {
	alg, _ := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1 << 30})
	s, _, err := For(LimitOf(alg, ""))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile("/tmp/single.lua", []byte(s.Source), 0o644)
	os.WriteFile("/tmp/batch.lua", []byte(Batch(s).Source), 0o644)
}
