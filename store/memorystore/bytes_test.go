package memorystore_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestBytesPerKey measures the Go heap the store holds per string key,
// as benchmarks/bytes_test.go does for the Limiter (the same keys and
// configurations: one allowed request each, then nothing for hours), but
// with the core module alone. It is a measurement, run only when asked:
//
//	RATELIMIT_MEASURE_MEMORY=1 go test -run TestBytesPerKey -v -count=1 ./store/memorystore/
//
// It fails when a narrow algorithm's key takes more than 64.5 bytes: a
// 56-byte entry, its index word and the index's slack.
func TestBytesPerKey(t *testing.T) {
	if os.Getenv("RATELIMIT_MEASURE_MEMORY") != "1" {
		t.Skip("a measurement: set RATELIMIT_MEASURE_MEMORY=1 to run it")
	}
	const (
		keys   = 1_000_000
		period = 3 * time.Hour
	)
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	algs := []struct {
		name   string
		alg    algorithm.Algorithm
		narrow bool
	}{
		{"token bucket (continuous)", must(tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1e-4})), true},
		{"token bucket (interval)", must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1, Tokens: 1, Interval: period})), true},
		{"sliding log (1 entry)", must(slidinglog.New(slidinglog.Config{Limit: 1, Window: period})), false},
		{"fixed window", must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: period})), true},
		{"GCRA", must(gcra.New(gcra.Config{Burst: 1, Every: period})), true},
		{"sliding-window counter", must(slidingwindow.New(slidingwindow.Config{Limit: 1, Window: period})), false},
	}
	ks := make([]string, keys)
	for i := range ks {
		ks[i] = fmt.Sprintf("user:%d", 1_000_000+i)
	}
	now := time.Now().UnixMicro()
	fmt.Printf("\nGo heap per key, memory store: %d keys like %q, one allowed request each; %s, %s/%s\n\n",
		keys, ks[0], runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Println("| algorithm | bytes/key |")
	fmt.Println("| --- | ---: |")
	for _, a := range algs {
		before := heapInUse()
		s := memorystore.New[string]()
		tab := open(t, s, a.alg)
		for _, k := range ks {
			if r := take(t, tab, k, now, 1); !r.Allowed() {
				t.Fatalf("%s: first request for %s: %+v, want allowed", a.name, k, r)
			}
		}
		after := heapInUse()
		if r := take(t, tab, ks[0], now, 1); r.Allowed() {
			t.Fatalf("%s: second request: %+v, want denied", a.name, r)
		}
		runtime.KeepAlive(tab)
		perKey := (float64(after) - float64(before)) / keys
		fmt.Printf("| %s | %.1f |\n", a.name, perKey)
		if a.narrow && perKey > 64.5 {
			t.Errorf("%s: %.1f bytes per key, want at most 64.5", a.name, perKey)
		}
	}
	runtime.KeepAlive(ks)
}
