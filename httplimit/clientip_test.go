package httplimit_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
)

// request returns a request from remote carrying headers, each value a
// header line of its own.
func request(remote string, headers map[string][]string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for k, vs := range headers {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return r
}

// TestClientIPNamedHeader plays a client behind a proxy that sets a
// single-address header and passes the client's X-Forwarded-For through:
// the key is the named header's address, never the spoofed list.
func TestClientIPNamedHeader(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	const (
		proxy     = "10.0.0.1:443"
		proxy6    = "[2001:db8:ffff::1]:443"
		untrusted = "192.0.2.1:1234"
		client    = "203.0.113.7"
		spoofed   = "198.51.100.66"
	)
	names := []string{
		"X-Real-IP", "CF-Connecting-IP", "True-Client-IP", "Fly-Client-IP",
		"Fastly-Client-IP", "X-Client-IP", "x-real-ip", "cf-connecting-ip",
	}
	for _, name := range names {
		cfg := httplimit.ClientIP{TrustedProxies: proxies, Header: name}
		tests := []struct {
			name    string
			remote  string
			headers map[string][]string
			want    string
			wantErr error
		}{
			{"trusted proxy, spoofed XFF beside", proxy,
				map[string][]string{name: {client}, "X-Forwarded-For": {spoofed}}, client, nil},
			{"trusted proxy, spoofed Forwarded beside", proxy,
				map[string][]string{name: {client}, "Forwarded": {"for=" + spoofed}}, client, nil},
			{"trusted IPv6 proxy, IPv6 client", proxy6,
				map[string][]string{name: {"2001:db8:cafe::17"}, "X-Forwarded-For": {spoofed}}, "2001:db8:cafe::17", nil},
			{"bracketed IPv6 with a port", proxy,
				map[string][]string{name: {"[2001:db8:cafe::17]:4711"}}, "2001:db8:cafe::17", nil},
			{"IPv4 with a port, spaces around", proxy,
				map[string][]string{name: {" " + client + ":80 "}}, client, nil},
			{"mapped IPv4", proxy,
				map[string][]string{name: {"::ffff:" + client}}, client, nil},
			{"a trusted address is believed too", proxy,
				map[string][]string{name: {"10.9.9.9"}, "X-Forwarded-For": {spoofed}}, "10.9.9.9", nil},
			{"the same address on two lines", proxy,
				map[string][]string{name: {client, client}}, client, nil},
			{"untrusted peer: its own address", untrusted,
				map[string][]string{name: {client}, "X-Forwarded-For": {spoofed}}, "192.0.2.1", nil},
			{"untrusted peer with garbage: its own address", untrusted,
				map[string][]string{name: {"garbage"}}, "192.0.2.1", nil},
			{"trusted proxy without the header: the proxy, not XFF", proxy,
				map[string][]string{"X-Forwarded-For": {spoofed}}, "10.0.0.1", nil},
			{"garbage", proxy,
				map[string][]string{name: {"garbage"}, "X-Forwarded-For": {spoofed}}, "", httplimit.ErrClientIPHeader},
			{"two addresses in one line", proxy,
				map[string][]string{name: {spoofed + ", " + client}}, "", httplimit.ErrClientIPHeader},
			{"two addresses separated by a space", proxy,
				map[string][]string{name: {spoofed + " " + client}}, "", httplimit.ErrClientIPHeader},
			{"two lines that differ", proxy,
				map[string][]string{name: {spoofed, client}}, "", httplimit.ErrClientIPHeader},
			{"a line of garbage after an address", proxy,
				map[string][]string{name: {client, "garbage"}}, "", httplimit.ErrClientIPHeader},
			{"empty value", proxy,
				map[string][]string{name: {""}, "X-Forwarded-For": {spoofed}}, "", httplimit.ErrClientIPHeader},
			{"Forwarded syntax", proxy,
				map[string][]string{name: {"for=" + client}}, "", httplimit.ErrClientIPHeader},
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				got, err := cfg.Addr(request(tt.remote, tt.headers))
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) || !errors.Is(err, httplimit.ErrNoClientIP) {
						t.Errorf("got %v (%v), want %v", got, err, tt.wantErr)
					}
					if _, err := cfg.Key(request(tt.remote, tt.headers)); !errors.Is(err, tt.wantErr) {
						t.Errorf("Key: got %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil || got.String() != tt.want {
					t.Errorf("got %v (%v), want %s", got, err, tt.want)
				}
			})
		}
	}
}

// TestClientIPListHeaders checks that X-Forwarded-For and Forwarded, in
// any case, are read as lists from the right, and that a single-address
// header beside them changes nothing.
func TestClientIPListHeaders(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	tests := []struct {
		name    string
		header  string
		remote  string
		headers map[string][]string
		want    string
	}{
		{"XFF by default, X-Real-IP ignored", "", "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7, 10.1.1.1"}, "X-Real-IP": {"198.51.100.66"}}, "203.0.113.7"},
		{"x-forwarded-for in lower case", "x-forwarded-for", "10.0.0.1:1",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 203.0.113.7"}}, "203.0.113.7"},
		{"Forwarded ignores X-Real-IP", "Forwarded", "10.0.0.1:1",
			map[string][]string{"X-Real-IP": {"198.51.100.66"}}, "10.0.0.1"},
		{"forwarded in lower case, FOR= in upper", "forwarded", "10.0.0.1:1",
			map[string][]string{"Forwarded": {"For=6.6.6.6, FOR=203.0.113.7;proto=https"}}, "203.0.113.7"},
		{"Forwarded quoted IPv6 with a port", "Forwarded", "10.0.0.1:1",
			map[string][]string{"Forwarded": {`for=6.6.6.6, for="[2001:db8:cafe::17]:4711";by=10.0.0.1`}}, "2001:db8:cafe::17"},
		{"Forwarded quoted IPv6 without a port", "Forwarded", "10.0.0.1:1",
			map[string][]string{"Forwarded": {`for="[2001:db8:cafe::17]"`}}, "2001:db8:cafe::17"},
		{"Forwarded quoted IPv4 with a port", "Forwarded", "10.0.0.1:1",
			map[string][]string{"Forwarded": {`for="203.0.113.7:4711"`}}, "203.0.113.7"},
		{"Forwarded skips trusted hops", "Forwarded", "10.0.0.1:1",
			map[string][]string{"Forwarded": {`for=6.6.6.6;proto=http, for=203.0.113.7`, `for="[2001:db8:ffff::9]", for=10.1.1.1`}}, "203.0.113.7"},
		{"Forwarded spoofed XFF beside", "Forwarded", "10.0.0.1:1",
			map[string][]string{"Forwarded": {"for=203.0.113.7"}, "X-Forwarded-For": {"198.51.100.66"}}, "203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := httplimit.ClientIP{TrustedProxies: proxies, Header: tt.header}
			got, err := cfg.Addr(request(tt.remote, tt.headers))
			if err != nil || got.String() != tt.want {
				t.Errorf("got %v (%v), want %s", got, err, tt.want)
			}
		})
	}
}

// TestClientIPHeaderName checks that a Header that is no header name fails
// every request, trusted peer or not, rather than reading another header.
func TestClientIPHeaderName(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, name := range []string{"X Real IP", "X-Real-IP:", "X-Real-IP: 1.2.3.4", "X-Real\tIP", "X-Réal-IP", " X-Real-IP", "(X-Real-IP)"} {
		cfg := httplimit.ClientIP{TrustedProxies: proxies, Header: name}
		for _, remote := range []string{"10.0.0.1:1", "192.0.2.1:1"} {
			r := request(remote, map[string][]string{"X-Real-IP": {"203.0.113.7"}, "X-Forwarded-For": {"203.0.113.7"}})
			got, err := cfg.Addr(r)
			if !errors.Is(err, httplimit.ErrHeaderName) {
				t.Errorf("Header %q from %s: got %v (%v), want ErrHeaderName", name, remote, got, err)
			}
			if _, err := cfg.Key(r); !errors.Is(err, httplimit.ErrHeaderName) {
				t.Errorf("Header %q from %s: Key got %v, want ErrHeaderName", name, remote, err)
			}
		}
	}
}

// TestClientIPMiddlewareSpoofedXFF runs the middleware behind a proxy that
// sets X-Real-IP and passes X-Forwarded-For through: a client that writes
// a new X-Forwarded-For on every request still has one limit.
func TestClientIPMiddlewareSpoofedXFF(t *testing.T) {
	fake := clock.NewFake(t0)
	lim := newLimiter[netip.Prefix](t, must(fixedwindow.New(fixedwindow.Config{Limit: 1, Window: time.Minute})), fake)
	ip := httplimit.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: "X-Real-IP"}
	h := httplimit.New(lim, ip.Key, httplimit.WithLogger(slog.New(slog.DiscardHandler))).Handler(ok)
	steps := []struct {
		name   string
		realIP string
		xff    string
		want   int
	}{
		{"first request", "203.0.113.7", "198.51.100.1", http.StatusOK},
		{"another spoofed XFF, the same X-Real-IP", "203.0.113.7", "198.51.100.2", http.StatusTooManyRequests},
		{"XFF naming another client's address", "203.0.113.7", "203.0.113.8", http.StatusTooManyRequests},
		{"another client", "203.0.113.8", "198.51.100.1", http.StatusOK},
		{"garbage X-Real-IP is not a fresh limit", "garbage", "198.51.100.3", http.StatusInternalServerError},
		{"no X-Real-IP: the proxy's own limit", "", "198.51.100.4", http.StatusOK},
		{"no X-Real-IP again: the proxy's limit is spent", "", "198.51.100.5", http.StatusTooManyRequests},
	}
	for _, s := range steps {
		headers := map[string][]string{"X-Forwarded-For": {s.xff}}
		if s.realIP != "" {
			headers["X-Real-IP"] = []string{s.realIP}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request("10.0.0.1:443", headers))
		if w.Code != s.want {
			t.Errorf("%s: got %d, want %d", s.name, w.Code, s.want)
		}
	}
}
