// Command evictattack measures what a Redis under memory pressure does to
// a client that has spent its limit while a flood of new keys arrives,
// for the maxmemory policies that matter to a rate limiter: allkeys-lru
// (evicts any key), volatile-ttl (evicts keys with a TTL, the soonest to
// expire first; every limiter key has one) and noeviction (refuses
// writes: ErrStoreFull).
//
// For each policy it starts a redis-server of its own on 127.0.0.1:-port
// with -maxmemory, and stops it (by its PID) before the next. A victim
// key of a token bucket of 10 an hour is spent, then for -rounds rounds
// -flood new keys are each charged (1 request, or 10: the whole bucket,
// so that their TTLs outlast the victim's), and the victim tries 10
// requests. It prints a markdown table:
//
//	go run ./evictattack -port 16390   (in integration/)
//
// The numbers vary a little between runs (Redis samples keys to evict),
// not what they show.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func main() {
	port := flag.Int("port", 16390, "the port of the redis-server started for each policy, on 127.0.0.1")
	maxmemory := flag.String("maxmemory", "4mb", "the servers' maxmemory")
	rounds := flag.Int("rounds", 10, "rounds of flood, then 10 tries of the victim")
	flood := flag.Int("flood", 20000, "new keys per round")
	flag.Parse()
	fmt.Printf("maxmemory %s, %d rounds of %d new keys, then 10 tries of the spent victim (a token bucket of 10 an hour)\n\n",
		*maxmemory, *rounds, *flood)
	fmt.Println("| policy | flood: requests per new key | victim admitted | rounds it was admitted in | flood keys refused (`ErrStoreFull`) | keys evicted | warning at Open |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "noeviction"} {
		for _, cost := range []int{1, 10} {
			r, err := measure(*port, *maxmemory, policy, *rounds, *flood, cost)
			if err != nil {
				log.Fatalf("%s, flood cost %d: %v", policy, cost, err)
			}
			fmt.Printf("| `%s` | %d | %d of %d | %d of %d | %d of %d | %d | %s |\n", policy, cost,
				r.victim, 10**rounds, r.victimRounds, *rounds, r.refused, *rounds**flood, r.evicted, r.warning)
		}
	}
}

type result struct {
	victim       int64 // victim requests admitted after it was spent
	victimRounds int   // rounds in which it was admitted at all
	refused      int64 // flood keys refused with ErrStoreFull
	evicted      int64 // INFO stats evicted_keys
	warning      string
}

func measure(port int, maxmemory, policy string, rounds, flood, cost int) (res result, err error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	stop, err := startServer(port, "--maxmemory", maxmemory, "--maxmemory-policy", policy)
	if err != nil {
		return res, err
	}
	defer stop()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 64})
	defer client.Close()
	ctx := context.Background()

	tb, err := tokenbucket.New(tokenbucket.Config{Capacity: 10, Rate: 10.0 / 3600})
	if err != nil {
		return res, err
	}
	st, err := goredisstore.New[string](client)
	if err != nil {
		return res, err
	}
	table, err := st.Open(store.LimitsOf(tb), clock.Local())
	if err != nil {
		return res, err
	}
	res.warning = "none"
	if w := table.(store.Warner).Warnings(); len(w) > 0 {
		res.warning = "`ErrEvicting`"
	}
	lim, err := ratelimit.New(tb, st, ratelimit.WithName("evictattack"))
	if err != nil {
		return res, err
	}
	for i := range 10 {
		if d, err := lim.Allow(ctx, "victim"); err != nil || !d.Allowed() {
			return res, fmt.Errorf("victim's request %d: %+v, %v; want admitted", i, d, err)
		}
	}
	for round := range rounds {
		if err := floodKeys(ctx, lim, round, flood, cost, &res.refused); err != nil {
			return res, err
		}
		admitted := int64(0)
		for range 10 {
			d, err := lim.Allow(ctx, "victim")
			if err != nil && !errors.Is(err, ratelimit.ErrStoreFull) {
				return res, fmt.Errorf("victim: %w", err)
			}
			if err == nil && d.Allowed() {
				admitted++
			}
		}
		res.victim += admitted
		if admitted > 0 {
			res.victimRounds++
		}
	}
	info, err := client.Info(ctx, "stats").Result()
	if err != nil {
		return res, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "evicted_keys:"); ok {
			res.evicted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return res, nil
}

// floodKeys charges flood new keys cost requests each, from 32 goroutines,
// counting the keys refused with ErrStoreFull.
func floodKeys(ctx context.Context, lim *ratelimit.Limiter[string], round, flood, cost int, refused *int64) error {
	var (
		next    atomic.Int64
		full    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		failed  error
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(flood); i = next.Add(1) - 1 {
				key := fmt.Sprintf("flood:%d:%d", round, i)
				_, err := lim.AllowN(ctx, key, cost)
				switch {
				case errors.Is(err, ratelimit.ErrStoreFull):
					full.Add(1)
				case err != nil:
					errOnce.Do(func() { failed = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	*refused += full.Load()
	return failed
}

// startServer starts redis-server on 127.0.0.1:port with args and waits
// until it answers. stop kills it by its PID and waits for it.
func startServer(port int, args ...string) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "evictattack")
	if err != nil {
		return nil, err
	}
	args = append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "no"}, args...)
	cmd := exec.Command("redis-server", args...)
	logFile, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		logFile.Close()
		os.RemoveAll(dir)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	defer c.Close()
	for range 100 {
		if c.Ping(context.Background()).Err() == nil {
			return stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "log"))
	stop()
	return nil, fmt.Errorf("redis-server on port %d did not answer:\n%s", port, out)
}
