package slidingwindow_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
)

// The accuracy measurement: per key, a limit of 100 per minute.
const (
	accLimit  = 100
	accWindow = 60 * sec // µs
	accKeys   = 200      // keys per traffic pattern, each its own stream (fewer with -short or -race)
	accSpan   = 100      // windows each key's traffic lasts
)

// pattern generates one key's request instants (Unix µs, ascending) over
// accSpan windows from start.
type pattern struct {
	name string
	gen  func(rng *rand.Rand, start int64) []int64
}

// poisson returns arrivals at rate per window, from start to end.
func poisson(rng *rand.Rand, start, end int64, rate float64) []int64 {
	var out []int64
	mean := float64(accWindow) / rate
	for t := float64(start); ; {
		t += rng.ExpFloat64() * mean
		if int64(t) >= end {
			return out
		}
		out = append(out, int64(t))
	}
}

func steady(factor float64) pattern {
	return pattern{fmt.Sprintf("steady, %.1f× the limit", factor), func(rng *rand.Rand, start int64) []int64 {
		return poisson(rng, start, start+accSpan*accWindow, factor*accLimit)
	}}
}

var patterns = []pattern{
	{"mixed: each key steady at 0.01×–10× the limit (log-uniform)", func(rng *rand.Rand, start int64) []int64 {
		factor := math.Pow(10, -2+3*rng.Float64())
		return poisson(rng, start, start+accSpan*accWindow, factor*accLimit)
	}},
	steady(0.5), steady(0.9), steady(1.0), steady(1.1), steady(2), steady(10),
	{"bursty: 50–200 requests within 1 s, every ~minute", func(rng *rand.Rand, start int64) []int64 {
		var out []int64
		for t := start; t < start+accSpan*accWindow; t += int64(rng.ExpFloat64() * float64(accWindow)) {
			n := 50 + rng.IntN(151)
			for range n {
				out = append(out, t+rng.Int64N(sec))
			}
			t += sec
		}
		return sortInts(out)
	}},
	{"edge bursts: the limit in the last and first 1% of each window", func(rng *rand.Rand, start int64) []int64 {
		var out []int64
		edge := int64(accWindow / 100)
		w0 := start/accWindow + 1
		for w := w0; w < w0+accSpan; w += 2 {
			boundary := w * accWindow
			for range accLimit {
				out = append(out, boundary-1-rng.Int64N(edge), boundary+rng.Int64N(edge))
			}
		}
		return sortInts(out)
	}},
}

func sortInts(s []int64) []int64 {
	slices.Sort(s)
	return s
}

// accuracy counts an algorithm's decisions on a pattern against the exact
// rule (at most the limit in every rolling window), applied to what the
// algorithm itself admitted: a request it admitted that takes the rolling
// window past the limit was admitted beyond the exact bound; one it
// denied that would have kept within the limit was denied below it.
type accuracy struct {
	requests, admitted, over, under int64
	worst                           int64 // the most admitted in any rolling window
	exact                           int64 // admitted by the exact sliding log on its own
}

func (e accuracy) pct(n int64) string {
	return fmt.Sprintf("%.4f%%", 100*float64(n)/float64(e.requests))
}

// measure replays pat's traffic, the same for every algorithm (the same
// seed per key), through alg and through the exact sliding log.
func measure(t *testing.T, alg algorithm.Algorithm, pat pattern, keys int) accuracy {
	t.Helper()
	log, err := slidinglog.New(slidinglog.Config{Limit: accLimit, Window: accWindow * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	var e accuracy
	for key := range keys {
		rng := rand.New(rand.NewPCG(uint64(key), 42))
		start := int64(1_763_700_000_000_000) + rng.Int64N(accWindow)
		requests := pat.gen(rng, start)
		s, exact := alg.Init(algorithm.State{}, start), log.Init(algorithm.State{}, start)
		var window []int64 // instants admitted by alg in the rolling window
		for _, now := range requests {
			e.requests++
			for len(window) > 0 && window[0] <= now-accWindow {
				window = window[1:]
			}
			fits := len(window)+1 <= accLimit
			var r algorithm.Result
			if exact, r = log.Take(exact, now, 1); r.Allowed() {
				e.exact++
			}
			if s, r = alg.Take(s, now, 1); r.Allowed() {
				e.admitted++
				window = append(window, now)
				e.worst = max(e.worst, int64(len(window)))
				if !fits {
					e.over++
				}
			} else if fits {
				e.under++
			}
		}
	}
	return e
}

// TestAccuracy replays steady, bursty and edge-burst traffic through the
// sliding-window counter (and, for comparison, the fixed window), and
// measures each decision against the exact rule: the README's figures.
//
//	go test -run TestAccuracy -v ./slidingwindow
//
// It checks the bound the package documents, that within any rolling
// window the counter admits less than twice the limit, and that a burst
// of the limit on each side of a window edge, which a fixed window admits
// whole, is held to the limit.
func TestAccuracy(t *testing.T) {
	counter, err := slidingwindow.New(slidingwindow.Config{Limit: accLimit, Window: accWindow * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := fixedwindow.New(fixedwindow.Config{Limit: accLimit, Window: accWindow * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	keys := accKeys
	if testing.Short() || raceEnabled {
		keys /= 10
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d keys per pattern, %d windows each, limit %d per %v:\n", keys, accSpan, accLimit, accWindow*time.Microsecond)
	fmt.Fprintf(&table, "| traffic | requests | algorithm | admitted (vs the exact log) | admitted beyond the exact bound | denied below it | most in a rolling window |\n")
	fmt.Fprintf(&table, "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n")
	var all accuracy
	for _, pat := range patterns {
		for _, a := range []struct {
			name string
			alg  algorithm.Algorithm
		}{{"slidingwindow", counter}, {"fixedwindow", fixed}} {
			e := measure(t, a.alg, pat, keys)
			fmt.Fprintf(&table, "| %s | %d | %s | %d (%+.2f%%) | %s | %s | %d |\n",
				pat.name, e.requests, a.name, e.admitted, 100*(float64(e.admitted)/float64(e.exact)-1),
				e.pct(e.over), e.pct(e.under), e.worst)
			if a.name == "slidingwindow" {
				if e.worst >= 2*accLimit {
					t.Errorf("%s: %d admitted in one rolling window, want fewer than twice the limit", pat.name, e.worst)
				}
				if strings.HasPrefix(pat.name, "edge bursts") && e.worst > accLimit {
					t.Errorf("%s: %d admitted in one rolling window, want at most the limit: the previous window weighs almost all of it just after the edge",
						pat.name, e.worst)
				}
				all.requests += e.requests
				all.over += e.over
				all.under += e.under
			}
		}
	}
	fmt.Fprintf(&table, "\nslidingwindow over every pattern: %d requests, %s admitted beyond the exact bound, %s denied below it, %s in all\n",
		all.requests, all.pct(all.over), all.pct(all.under), all.pct(all.over+all.under))
	t.Log("\n" + table.String())
}
