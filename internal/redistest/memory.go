package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SettledUsedMemory waits until m is the only client connected and
// used_memory has stayed the same for three readings 200 ms apart (a hash
// table that was growing has finished rehashing), then returns it. For
// measurements of memory per key.
func SettledUsedMemory(t testing.TB, m *redis.Client) int64 {
	t.Helper()
	last, same := int64(-1), 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		fields := Info(t, m)
		used, err := strconv.ParseInt(fields["used_memory"], 10, 64)
		if err != nil {
			t.Fatalf("used_memory: %v", err)
		}
		if fields["connected_clients"] != "1" || used != last {
			last, same = used, 0
			continue
		}
		if same++; same == 3 {
			return used
		}
	}
	t.Fatal("used_memory did not settle within 30 s")
	return 0
}

// Info returns the fields of INFO.
func Info(t testing.TB, m *redis.Client) map[string]string {
	t.Helper()
	text, err := m.Info(t.Context()).Result()
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}
