package luascript_test

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// monitor watches a real server's commands (MONITOR, on a connection of
// its own) and returns seen: how many commands named cmd on key the
// server has run since the last call of seen. seen waits for a marker
// command of its own to come through, so that every command sent before
// it is counted; other clients' commands, on other keys, are not.
func monitor(t *testing.T, addr string) (seen func(cmd, key string) int) {
	t.Helper()
	all := monitorAll(t, addr)
	return func(cmd, key string) int {
		t.Helper()
		return all()[key][cmd]
	}
}

// monitorAll is monitor counting every command at once: seen()[key][cmd]
// is how many commands named cmd (as sent: a script's as it wrote them)
// on key the server has run since the last call of seen.
func monitorAll(t *testing.T, addr string) (seen func() map[string]map[string]int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	client := redistest.GoRedis(t, redistest.Target{Name: "redis", Addrs: []string{addr}})
	marks := 0
	return func() map[string]map[string]int {
		t.Helper()
		marks++
		mark := fmt.Sprintf("%smark%d", redistest.Prefix(t), marks)
		if err := client.Exists(t.Context(), mark).Err(); err != nil {
			t.Fatal(err)
		}
		n := map[string]map[string]int{}
		deadline := time.After(10 * time.Second)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatal("MONITOR's connection ended")
				}
				if strings.Contains(line, fmt.Sprintf("%q %q", "exists", mark)) {
					return n
				}
				// 1700000000.000001 [0 lua] "CMD" "key" ...
				_, args, _ := strings.Cut(line, "] ")
				cmd, rest, _ := strings.Cut(strings.TrimRight(args, "\r\n"), " ")
				q, _, _ := strings.Cut(rest, " ")
				if key, err := strconv.Unquote(q); err == nil {
					if n[key] == nil {
						n[key] = map[string]int{}
					}
					n[key][strings.Trim(cmd, `"`)]++
				}
			case <-deadline:
				t.Fatalf("MONITOR did not show %s within 10s", mark)
			}
		}
	}
}

// TestOneExpirePerWrite checks that a script writing a key's hash sets
// the key's TTL with one PEXPIRE, whatever the key held: NX on a key it
// found none of its fields in (a new key has no TTL), GT on a key that
// holds one (every write of a field sets a TTL, so it has one). Before,
// every write called GT first and, when that set nothing (a new key, or
// a TTL as long as the one asked for, as every write within one fixed
// window asks), NX after it: two calls where one does. Decision scripts
// of one limit and of several (nested, and past nestLimits, closures),
// batches and bookings; a limit kept in a sorted set (a log) expires its
// own key, which is not counted here. A fixed window's charge alone in
// its script calls none within the window its state already counts: the
// TTL that state's write set lasts to the window's end.
//
// The hour-long window must not end within the test's first second:
// now is put 10 minutes into an hour.
func TestOneExpirePerWrite(t *testing.T) {
	// A server of the test's own: MONITOR slows a server down for every
	// client, and other packages' tests share the standalone one.
	target := redistest.StartServer(t).Target()
	client := redistest.GoRedis(t, target)
	seen := monitor(t, target.Addrs[0])
	must := func(a algorithm.Algorithm, err error) algorithm.Algorithm {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bucket := must(tokenbucket.PerSecond(1000))
	interval := must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 1000, Tokens: 10, Interval: time.Second}))
	cell := must(gcra.Per(1000, time.Second))
	fixed := must(fixedwindow.Per(1000, time.Hour))
	sliding := must(slidingwindow.Per(1000, time.Minute))
	logl := must(slidinglog.Per(1000, time.Minute))
	sets := map[string][]algorithm.Algorithm{
		"tokenbucket":          {bucket},
		"tokenbucket-interval": {interval},
		"gcra":                 {cell},
		"fixedwindow":          {fixed},
		"slidingwindow":        {sliding},
		"bucket+window":        {bucket, fixed},
		"log+window":           {logl, fixed},
		"six":                  {bucket, interval, cell, fixed, sliding, logl},
	}
	now := time.Now().UnixMicro()
	now = now - now%3_600_000_000 + 600_000_000
	for name, algs := range sets {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			limits := make([]luascript.Limit, len(algs))
			ids := make([]string, len(algs))
			for i, a := range algs {
				ids[i] = fmt.Sprint("l", i)
				limits[i] = luascript.LimitOf(a, ids[i])
			}
			decision, params, err := luascript.For(limits...)
			if err != nil {
				t.Fatal(err)
			}
			book, _, err := luascript.ForOp(luascript.OpBook, limits...)
			if err != nil {
				t.Fatal(err)
			}
			batch := luascript.Batch(decision)
			shared := append([]any{"600000"}, anys(params)...)
			calls := map[string]func(keys []string, now int64) error{
				"decision": func(keys []string, now int64) error {
					args := append([]any{strconv.FormatInt(now, 10), "1"}, shared...)
					return client.Eval(ctx, decision.Source, keys, args...).Err()
				},
				"batch": func(keys []string, now int64) error {
					args := []any{"3"}
					for range 3 {
						args = append(args, strconv.FormatInt(now, 10), "1")
					}
					return client.Eval(ctx, batch.Source, keys, append(args, shared...)...).Err()
				},
				"book": func(keys []string, now int64) error {
					args := append([]any{strconv.FormatInt(now, 10), "1"}, shared...)
					return client.Eval(ctx, book.Source, keys, append(args, "0", testNonce)...).Err()
				},
			}
			for what, call := range calls {
				base := redistest.Prefix(t) + "{k}"
				keys := luascript.Keys(base, ids...)
				hash := keys[0]
				t.Cleanup(func() { client.Del(ctx, keys...) })
				seen("PEXPIRE", hash)
				// A new key, the same instant again (the same TTL asked
				// for), a later one, and one in the window after the
				// hour's. A fixed window's charge alone in its script (a
				// decision, or a booking made at now) sets none where the
				// key's TTL already lasts to its window's end (a charge in
				// the window the state counts).
				for i, at := range []int64{now, now, now + 1000, now + 3_600_000_000} {
					if err := call(keys, at); err != nil {
						t.Fatalf("%s %d: %v", what, i, err)
					}
					want := 1
					if name == "fixedwindow" && (what == "decision" || what == "book") && i > 0 && i < 3 {
						want = 0
					}
					if n := seen("PEXPIRE", hash); n != want {
						t.Errorf("%s %d: %d PEXPIREs of the key's hash, want %d", what, i, n, want)
					}
					if d := client.PTTL(ctx, hash).Val(); d <= 0 {
						t.Errorf("%s %d: PTTL = %v, want a TTL", what, i, d)
					}
				}
			}
		})
	}
}
