package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// connRunner is a redisstore.Runner over one connection to a standalone
// Redis, speaking RESP with nothing but the standard library: the whole of
// a store for another client. Calls take turns on the connection; one that
// fails on the network closes it, since its reply may still come.
type connRunner struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// serverError is an error reply; its text is the server's, as Runner asks.
type serverError string

func (e serverError) Error() string { return string(e) }

func (c *connRunner) Eval(ctx context.Context, s *redisstore.Script, readOnly bool, keys []string, args redisstore.Args, reply []int64) ([]int64, error) {
	sha, src := "EVALSHA", "EVAL"
	if readOnly {
		sha, src = "EVALSHA_RO", "EVAL_RO"
	}
	v, err := c.eval(ctx, sha, src, s, keys, args.All())
	if err != nil {
		return nil, err
	}
	reply = reply[:0]
	for _, e := range v.([]any) {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("%s script replied %v, want integers", s.Name, v)
		}
		reply = append(reply, n)
	}
	return reply, nil
}

func (c *connRunner) EvalStrings(ctx context.Context, s *redisstore.Script, keys []string, args []string) ([]string, error) {
	v, err := c.eval(ctx, "EVALSHA", "EVAL", s, keys, args)
	if err != nil {
		return nil, err
	}
	var strs []string
	for _, e := range v.([]any) {
		strs = append(strs, fmt.Sprint(e))
	}
	return strs, nil
}

func (c *connRunner) Del(ctx context.Context, keys []string) error {
	_, err := c.do(ctx, append([]string{"UNLINK"}, keys...))
	return err
}

// eval sends EVALSHA (sha), then EVAL (src) if the server has not the script.
func (c *connRunner) eval(ctx context.Context, sha, src string, s *redisstore.Script, keys, args []string) (any, error) {
	call := append([]string{sha, s.SHA1, strconv.Itoa(len(keys))}, keys...)
	call = append(call, args...)
	v, err := c.do(ctx, call)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		call[0], call[1] = src, s.Source
		v, err = c.do(ctx, call)
	}
	if _, ok := v.([]any); err == nil && !ok {
		return nil, fmt.Errorf("%s script replied %v, want an array", s.Name, v)
	}
	return v, err
}

// do sends one command and reads its reply, within ctx's deadline.
func (c *connRunner) do(ctx context.Context, args []string) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline, _ := ctx.Deadline()
	c.conn.SetDeadline(deadline)
	cmd := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		cmd = fmt.Appendf(cmd, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := c.conn.Write(cmd)
	var v any
	if err == nil {
		v, err = readReply(c.r)
	}
	if err != nil && !errors.As(err, new(serverError)) {
		c.conn.Close() // the reply may still come: no later call may read it
	}
	return v, err
}

// readReply reads a RESP2 reply: a string, an integer, nil or an array of
// them; an error reply is a serverError.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch kind, rest := line[0], line[1:]; kind {
	case '+':
		return rest, nil
	case '-':
		return nil, serverError(rest)
	case ':':
		return strconv.ParseInt(rest, 10, 64)
	case '$', '*':
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return nil, err // a nil reply, or a malformed length
		}
		if kind == '$' {
			b := make([]byte, n+2)
			_, err := io.ReadFull(r, b)
			return string(b[:n]), err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

// A store for another Redis client is a Runner over it, given to New.
// Here the client is the bare connection above (connRunner), to a Redis
// at 127.0.0.1:6379 (TestConnRunner makes the same calls on the Redis at
// $RATELIMIT_REDIS_ADDR).
func Example_runner() {
	conn, err := net.Dial("tcp", "127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	st, err := redisstore.New(&connRunner{conn: conn, r: bufio.NewReader(conn)},
		redisstore.WithPrefix[string]("myapp:ratelimit:"))
	if err != nil {
		log.Fatal(err)
	}
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 2, Rate: 1.0 / 60}) // a token a minute
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(alg, st, ratelimit.WithName("api"))
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		d, err := lim.Allow(context.Background(), "user:123")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("allowed:", d.Allowed(), "remaining:", d.Remaining())
	}
	// With a fresh key, it prints:
	// allowed: true remaining: 1
	// allowed: true remaining: 0
	// allowed: false remaining: 0
}
