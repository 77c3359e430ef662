package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRunServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-store", "miniredis"}, stdout, io.Discard)
		stdout.Close()
	}()

	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatalf("run printed nothing: %v", <-done)
	}
	first := lines.Text()
	const prefix = "ratelimit-demo: serving http://127.0.0.1:"
	if !strings.HasPrefix(first, prefix) || !strings.HasSuffix(first, "(store miniredis); Ctrl-C stops") {
		t.Fatalf("first line = %q, want %q…", first, prefix)
	}
	url := strings.Fields(first)[2]
	res, err := http.Get(url + "api/config")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET %sapi/config: %d", url, res.StatusCode)
	}

	cancel() // as SIGINT would
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		for lines.Scan() {
			b.WriteString(lines.Text() + "\n")
		}
		rest <- b.String()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if got := <-rest; got != "ratelimit-demo: stopped\n" {
		t.Errorf("after shutdown printed %q", got)
	}
}

func TestRunFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", "etcd"}, `-store "etcd": want memory, miniredis or redis`},
		{[]string{"-store", "redis"}, "-store redis needs -redis host:port"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"-addr", "127.0.0.1:0", "-redis", "127.0.0.1:1"}, "cannot reach Redis"},
	} {
		err := run(context.Background(), tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestPageURL(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080/"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080/"},
		{"[::]:8080", "http://127.0.0.1:8080/"},
		{"[::1]:9000", "http://[::1]:9000/"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := pageURL(addr); got != tc.want {
			t.Errorf("pageURL(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
