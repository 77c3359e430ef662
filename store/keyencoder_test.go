package store_test

import (
	"errors"
	"math"
	"net/netip"
	"testing"

	"github.com/go-ratelimit/ratelimit/store"
)

type (
	userID  string
	shardID int16
	port    uint16
	pair    struct{ a, b int }
	ipAlias netip.Addr
)

// encodings checks that DefaultKeyEncoder[K] encodes each key as its
// string, appending to what dst holds, without allocating.
func encodings[K comparable](t *testing.T, cases map[K]string) {
	t.Helper()
	enc, err := store.DefaultKeyEncoder[K]()
	if err != nil {
		t.Fatalf("DefaultKeyEncoder[%T]: %v", *new(K), err)
	}
	buf := make([]byte, 0, 128)
	for k, want := range cases {
		if got := string(enc(append(buf[:0], "p:"...), k)); got != "p:"+want {
			t.Errorf("encode %T(%v) after \"p:\" = %q, want %q", k, k, got, "p:"+want)
		}
		if allocs := testing.AllocsPerRun(100, func() { buf = enc(buf[:0], k) }); allocs != 0 {
			t.Errorf("encode %T(%v): %v allocations, want 0", k, k, allocs)
		}
	}
}

func TestDefaultKeyEncoder(t *testing.T) {
	encodings(t, map[string]string{"": "", "alice": "alice", "a}b{": "a}b{", "\x00\xff": "\x00\xff"})
	encodings(t, map[userID]string{"u-1": "u-1", "": ""})
	encodings(t, map[int]string{0: "0", -1: "-1", math.MaxInt: "9223372036854775807", math.MinInt: "-9223372036854775808"})
	encodings(t, map[int8]string{math.MinInt8: "-128", math.MaxInt8: "127"})
	encodings(t, map[int16]string{math.MinInt16: "-32768", 7: "7"})
	encodings(t, map[shardID]string{-3: "-3", 300: "300"})
	encodings(t, map[int32]string{math.MinInt32: "-2147483648", math.MaxInt32: "2147483647"})
	encodings(t, map[int64]string{math.MinInt64: "-9223372036854775808", 42: "42"})
	encodings(t, map[uint]string{0: "0", math.MaxUint: "18446744073709551615"})
	encodings(t, map[uint8]string{255: "255"})
	encodings(t, map[uint16]string{65535: "65535"})
	encodings(t, map[port]string{8080: "8080"})
	encodings(t, map[uint32]string{math.MaxUint32: "4294967295"})
	encodings(t, map[uint64]string{math.MaxUint64: "18446744073709551615"})
	encodings(t, map[netip.Addr]string{
		netip.MustParseAddr("192.0.2.1"):        "192.0.2.1",
		netip.MustParseAddr("2001:db8::1"):      "2001:db8::1",
		netip.MustParseAddr("::ffff:192.0.2.1"): "::ffff:192.0.2.1",
		netip.MustParseAddr("fe80::1%eth0"):     "fe80::1%eth0",
		netip.MustParseAddr("0.0.0.0"):          "0.0.0.0",
		netip.MustParseAddr("::"):               "::",
		{}:                                      "",
	})
	encodings(t, map[netip.Prefix]string{
		netip.MustParsePrefix("192.0.2.0/24"):                  "192.0.2.0/24",
		netip.MustParsePrefix("2001:db8::/32"):                 "2001:db8::/32",
		netip.MustParsePrefix("192.0.2.1/32"):                  "192.0.2.1/32",
		netip.MustParsePrefix("::ffff:1.2.3.4/128"):            "::ffff:1.2.3.4/128",
		netip.PrefixFrom(netip.MustParseAddr("192.0.2.1"), 33): "192.0.2.1/-1",
		{}: "/-1",
	})
}

// TestDefaultKeyEncoderDistinct checks that the encodings of one type
// never collide: the addresses an IPv4 and its IPv4-mapped IPv6 form are
// different keys, as are an address and its /32 prefix.
func TestDefaultKeyEncoderDistinct(t *testing.T) {
	enc, err := store.DefaultKeyEncoder[netip.Addr]()
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("1.2.3.4"), netip.MustParseAddr("::ffff:1.2.3.4")
	if string(enc(nil, a)) == string(enc(nil, b)) {
		t.Errorf("%v and %v share the encoding %q", a, b, enc(nil, a))
	}
	prefixes, err := store.DefaultKeyEncoder[netip.Prefix]()
	if err != nil {
		t.Fatal(err)
	}
	// Invalid prefixes (bits out of range) are distinct keys too; their
	// text forms are all "invalid Prefix".
	all := []netip.Prefix{
		{},
		netip.PrefixFrom(netip.MustParseAddr("1.2.3.4"), 33),
		netip.PrefixFrom(netip.MustParseAddr("5.6.7.8"), 40),
		netip.PrefixFrom(netip.MustParseAddr("5.6.7.8"), 32),
		netip.PrefixFrom(netip.MustParseAddr("::1"), 129),
		netip.PrefixFrom(netip.MustParseAddr("::1"), 128),
		netip.MustParsePrefix("1.2.3.0/24"),
		netip.MustParsePrefix("1.2.3.4/24"),
	}
	byEncoding := map[string]netip.Prefix{}
	for _, p := range all {
		s := string(prefixes(nil, p))
		if q, dup := byEncoding[s]; dup && q != p {
			t.Errorf("prefixes %v (addr %v) and %v (addr %v) share the encoding %q", p, p.Addr(), q, q.Addr(), s)
		}
		byEncoding[s] = p
	}
	ints, err := store.DefaultKeyEncoder[int64]()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	for _, v := range []int64{0, 1, -1, 10, -10, 100, math.MaxInt64, math.MinInt64} {
		s := string(ints(nil, v))
		if w, dup := seen[s]; dup {
			t.Errorf("%d and %d share the encoding %q", v, w, s)
		}
		seen[s] = v
	}
}

func TestDefaultKeyEncoderUnsupported(t *testing.T) {
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrKeyType) {
			t.Errorf("DefaultKeyEncoder[%s]: %v, want ErrKeyType", name, err)
		}
	}
	_, err := store.DefaultKeyEncoder[pair]()
	check("struct", err)
	_, err = store.DefaultKeyEncoder[ipAlias]()
	check("a named netip.Addr", err)
	_, err = store.DefaultKeyEncoder[bool]()
	check("bool", err)
	_, err = store.DefaultKeyEncoder[float64]()
	check("float64", err)
	_, err = store.DefaultKeyEncoder[*int]()
	check("pointer", err)
	_, err = store.DefaultKeyEncoder[[2]byte]()
	check("array", err)
	_, err = store.DefaultKeyEncoder[any]()
	check("interface", err)
}
