// Command ratelimit-demo serves an interactive page for trying the
// library's algorithms and stores: send one request or a burst, watch each
// decision, the remaining tokens or window count and the retry time in a
// live chart, and change the algorithm, its parameters and the store on the
// fly.
//
//	go run -C cmd/ratelimit-demo .                   # memory store, http://127.0.0.1:8080
//	go run -C cmd/ratelimit-demo . -store miniredis  # an embedded miniredis
//	go run -C cmd/ratelimit-demo . -store redis -redis 127.0.0.1:6379
//
// from the repository's root: the demo is a module of its own (it needs
// miniredis and, for its browser test, chromedp, which the library does
// not), and -C runs the go command in its directory.
//
// The page is served from the binary and needs nothing from the network.
// Behind it is a JSON API that scripts can call too:
//
//	POST /api/request?key=demo&cost=1  a request through httplimit's middleware:
//	                                   200 with the decision as JSON, or 429
//	                                   with problem+json; RateLimit,
//	                                   RateLimit-Policy and X-RateLimit-* headers
//	GET  /api/config                   the algorithm, its parameters, the store
//	PUT  /api/config                   change them (fields left out are kept);
//	                                   400 with the ErrInvalidConfig message
//	GET  /api/state?key=demo           the key's state now, charging nothing
//	POST /api/reset?key=demo           forget the key's state
//	GET  /api/compare?pattern=steady   one traffic pattern (steady, bursty,
//	                                   boundary, drip) through all six
//	                                   algorithms on a fake clock: each
//	                                   one's admitted and denied instants
//
// For example:
//
//	curl -i -X POST 'http://127.0.0.1:8080/api/request?key=demo&cost=2'
//	curl -X PUT -d '{"algorithm":"fixedwindow","limit":5,"window":"10s"}' http://127.0.0.1:8080/api/config
//
// With -figure FILE it writes docs/algorithms.svg's picture (the comparison
// of every pattern, on a memory store) to FILE and exits; go generate runs
// it.
//
// On Redis, each configuration writes keys under a prefix of its own
// ("ratelimit-demo:RUN:GENERATION:"), so state of an earlier configuration
// is never read; old keys expire with their TTLs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratelimit-demo:", err)
		os.Exit(1)
	}
}

// run parses args, serves the demo until ctx ends, then shuts down
// gracefully. It prints the page's address to stdout once it listens.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("ratelimit-demo", flag.ContinueOnError)
	flags.SetOutput(stderr)
	addr := flags.String("addr", "127.0.0.1:8080", "`host:port` to listen on")
	storeName := flags.String("store", storeMemory, "store to start on: memory, miniredis (embedded) or redis (needs -redis)")
	redisAddr := flags.String("redis", "", "`host:port` of a real Redis, offered as the redis store")
	figurePath := flags.String("figure", "", "write the algorithms' comparison as an SVG to `file` and exit")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if *figurePath != "" {
		svg, err := figure()
		if err != nil {
			return err
		}
		return os.WriteFile(*figurePath, svg, 0o644)
	}
	switch *storeName {
	case storeMemory, storeMiniredis:
	case storeRedis:
		if *redisAddr == "" {
			return errors.New("-store redis needs -redis host:port")
		}
	default:
		return fmt.Errorf("-store %q: want memory, miniredis or redis", *storeName)
	}

	srv, err := newServer(ctx, serverOptions{Store: *storeName, RedisAddr: *redisAddr})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "ratelimit-demo: serving %s (store %s); Ctrl-C stops\n", pageURL(ln.Addr()), *storeName)

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(stdout, "ratelimit-demo: stopped")
	return nil
}

// pageURL is the address to open in a browser: an unspecified listening
// address (0.0.0.0, ::) is shown as 127.0.0.1.
func pageURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
