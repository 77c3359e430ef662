package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ErrNoClientIP reports a request whose client address cannot be read.
var ErrNoClientIP = errors.New("httplimit: no client IP")

// ErrClientIPHeader reports a single-address header (see ClientIP.Header),
// sent by a trusted proxy, that does not hold exactly one address. It wraps
// ErrNoClientIP. The middleware's default error handler answers it with
// 500 Internal Server Error: a trusted proxy sent it, so the deployment is
// at fault, and no request gets a limit of its own by sending garbage.
var ErrClientIPHeader = fmt.Errorf("%w: the client IP header does not hold one address", ErrNoClientIP)

// ErrHeaderName reports a ClientIP.Header that is not a valid header name.
var ErrHeaderName = errors.New("httplimit: ClientIP.Header is not a valid header name")

// ClientIP finds the address a request came from, for limits by client.
//
// By default it is the peer of the connection (http.Request.RemoteAddr),
// and forwarding headers are ignored: anyone can send them. Behind
// proxies, list them in TrustedProxies: only when the peer is one of them
// is the header named by Header read, and no other header ever is. A
// request from an untrusted peer cannot change its address by sending a
// header.
//
// X-Forwarded-For and Forwarded are lists, read from the right (the hop
// nearest this server): the first address that is not a trusted proxy is
// the client; a hop that is not an address ends the walk at the trusted
// proxy that passed it on. Any other header, such as X-Real-IP or
// CF-Connecting-IP, holds one address that the proxy sets: a value that is
// not exactly one address (several, garbage, an empty value, or lines
// that differ) is ErrClientIPHeader, never another header's address or the
// peer's. A trusted peer that sends no Header at all (a proxy that did not
// set it, or a trusted host calling directly) is itself the client: every
// request it passes on that way shares its one limit.
//
// Every proxy that can reach this server must set a single-address header
// itself, replacing what its client sent, or the client chooses its key.
type ClientIP struct {
	// TrustedProxies are the networks of the proxies in front of this
	// server whose forwarding headers are believed.
	TrustedProxies []netip.Prefix
	// Header is the header that trusted proxies put the client's address
	// in: "X-Forwarded-For" (the default), "Forwarded" (RFC 7239, its for=
	// parameters), or any other name for a header holding one address,
	// such as "X-Real-IP", "CF-Connecting-IP" or "True-Client-IP". Names
	// are case-insensitive. A name that is not a valid header name (with a
	// space or a colon, say) fails every request with ErrHeaderName.
	Header string
	// IPv6Bits is the prefix length IPv6 clients are grouped by in Key:
	// one client usually holds a whole /64, the default. 128 keys each
	// address apart.
	IPv6Bits int
	// IPv4Bits is the prefix length IPv4 clients are grouped by in Key
	// (default 32, each address apart).
	IPv4Bits int
}

// Addr returns the client's address.
func (c ClientIP) Addr(r *http.Request) (netip.Addr, error) {
	name, list, err := c.header()
	if err != nil {
		return netip.Addr{}, err
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	var peer netip.Addr
	if err == nil {
		peer = ap.Addr()
	} else if peer, err = netip.ParseAddr(r.RemoteAddr); err != nil {
		return netip.Addr{}, fmt.Errorf("%w: RemoteAddr %q", ErrNoClientIP, r.RemoteAddr)
	}
	peer = peer.Unmap().WithZone("")
	if !c.trusted(peer) {
		return peer, nil
	}
	if !list {
		return single(r, name, peer)
	}
	hops := hops(r, name)
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			// The trusted proxy to the right passed on something that is
			// not an address; it is the last hop we can name.
			return client, nil
		}
		client = hop
		if !c.trusted(hop) {
			return hop, nil
		}
	}
	return client, nil
}

// Key returns the client's address grouped into its network: a /64 for
// IPv6 and a /32 for IPv4 unless configured otherwise. It is a key for a
// ratelimit.Limiter[netip.Prefix].
func (c ClientIP) Key(r *http.Request) (netip.Prefix, error) {
	addr, err := c.Addr(r)
	if err != nil {
		return netip.Prefix{}, err
	}
	bits := c.IPv4Bits
	if bits <= 0 || bits > 32 {
		bits = 32
	}
	if addr.Is6() {
		bits = c.IPv6Bits
		if bits <= 0 || bits > 128 {
			bits = 64
		}
	}
	return addr.Prefix(bits)
}

func (c ClientIP) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// header returns the canonical name of the header to read, and whether it
// is a list (X-Forwarded-For or Forwarded).
func (c ClientIP) header() (name string, list bool, err error) {
	if c.Header == "" {
		return "X-Forwarded-For", true, nil
	}
	if !validHeaderName(c.Header) {
		return "", false, fmt.Errorf("%w: %q", ErrHeaderName, c.Header)
	}
	name = http.CanonicalHeaderKey(c.Header)
	return name, name == "X-Forwarded-For" || name == "Forwarded", nil
}

// validHeaderName reports whether s is a field name: a token of RFC 9110.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// single reads the header name that holds one address, sent by a trusted
// peer: peer when the request has no such header, and ErrClientIPHeader
// when its lines are not one address each, all the same.
func single(r *http.Request, name string, peer netip.Addr) (netip.Addr, error) {
	lines := r.Header.Values(name)
	if len(lines) == 0 {
		return peer, nil
	}
	var client netip.Addr
	for i, line := range lines {
		a, ok := parseHop(strings.TrimSpace(line))
		if !ok {
			// The value is the client's, maybe; keep it out of the error,
			// which is logged.
			return netip.Addr{}, fmt.Errorf("%w: %s is not an address", ErrClientIPHeader, name)
		}
		if i > 0 && a != client {
			return netip.Addr{}, fmt.Errorf("%w: %s has %d lines that differ", ErrClientIPHeader, name, len(lines))
		}
		client = a
	}
	return client, nil
}

// hops returns the entries of the list header name, X-Forwarded-For or
// Forwarded, client first, over all the header's lines in order.
func hops(r *http.Request, name string) []string {
	var hops []string
	if name == "Forwarded" {
		for _, line := range r.Header.Values("Forwarded") {
			for _, elem := range strings.Split(line, ",") {
				for _, pair := range strings.Split(elem, ";") {
					param, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(param, "for") {
						hops = append(hops, strings.Trim(value, `"`))
					}
				}
			}
		}
		return hops
	}
	for _, line := range r.Header.Values(name) {
		for _, h := range strings.Split(line, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// parseHop reads one forwarded address: "192.0.2.1", "192.0.2.1:80",
// "2001:db8::1", "[2001:db8::1]:80".
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
