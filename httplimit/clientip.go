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

// ClientIP finds the address a request came from, for limits by client.
//
// By default it is the peer of the connection (http.Request.RemoteAddr),
// and forwarding headers are ignored: anyone can send them. Behind
// proxies, list them in TrustedProxies: when the peer is one of them, the
// forwarding header is read from the right (the hop nearest this server)
// and the first address that is not a trusted proxy is the client. A
// request from an untrusted peer cannot change its address by sending a
// header.
type ClientIP struct {
	// TrustedProxies are the networks of the proxies in front of this
	// server whose forwarding headers are believed.
	TrustedProxies []netip.Prefix
	// Header is the forwarding header to read: "X-Forwarded-For" (the
	// default) or "Forwarded" (RFC 7239, its for= parameters).
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
	hops := c.hops(r)
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

// hops returns the forwarding header's entries, client first, over all
// the header's lines in order.
func (c ClientIP) hops(r *http.Request) []string {
	if strings.EqualFold(c.Header, "Forwarded") {
		var hops []string
		for _, line := range r.Header.Values("Forwarded") {
			for _, elem := range strings.Split(line, ",") {
				for _, pair := range strings.Split(elem, ";") {
					name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(name, "for") {
						hops = append(hops, strings.Trim(value, `"`))
					}
				}
			}
		}
		return hops
	}
	var hops []string
	for _, line := range r.Header.Values("X-Forwarded-For") {
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
