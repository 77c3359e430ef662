package keyhash

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func TestKinds(t *testing.T) {
	type name string
	type id uint16
	for _, c := range []struct {
		got, want keyKind
		of        string
	}{
		{New[string]().kind, keyString, "string"},
		{New[name]().kind, keyString, "named string"},
		{New[int8]().kind, keyInt8, "int8"},
		{New[uint8]().kind, keyInt8, "uint8"},
		{New[id]().kind, keyInt16, "named uint16"},
		{New[int32]().kind, keyInt32, "int32"},
		{New[uint64]().kind, keyInt64, "uint64"},
		{New[int]().kind, map[uintptr]keyKind{4: keyInt32, 8: keyInt64}[unsafe.Sizeof(0)], "int"},
		{New[uintptr]().kind, map[uintptr]keyKind{4: keyInt32, 8: keyInt64}[unsafe.Sizeof(uintptr(0))], "uintptr"},
		// The rest go to maphash: floats, whose equal keys may differ in
		// their bits, and the kinds the fast path does not read.
		{New[float64]().kind, keyComparable, "float64"},
		{New[complex64]().kind, keyComparable, "complex64"},
		{New[any]().kind, keyComparable, "interface"},
		{New[struct{ a, b string }]().kind, keyComparable, "struct"},
		{New[[2]int]().kind, keyComparable, "array"},
		{New[*int]().kind, keyComparable, "pointer"},
	} {
		if c.got != c.want {
			t.Errorf("%s keys: kind %d, want %d", c.of, c.got, c.want)
		}
	}
}

// TestReadsEveryByteAndNoMore hashes strings of every length up to
// 100 that lie inside a larger buffer: changing any bit of the string
// must change the hash, and changing the bytes around it must not.
func TestReadsEveryByteAndNoMore(t *testing.T) {
	h := New[string]()
	const margin = 24
	for n := range 101 {
		buf := make([]byte, margin+n+margin)
		for i := range buf {
			buf[i] = byte(rand.Uint32())
		}
		s := unsafe.String(&buf[margin], n)
		want := h.Sum(s)
		if got := h.Sum(string([]byte(s))); got != want {
			t.Fatalf("len %d: a copy hashes to %#x, the original to %#x", n, got, want)
		}
		for i := range margin {
			buf[i]++
			buf[margin+n+i]++
		}
		if got := h.Sum(s); got != want {
			t.Fatalf("len %d: the bytes around the key changed its hash", n)
		}
		for i := range n {
			for bit := range 8 {
				buf[margin+i] ^= 1 << bit
				if h.Sum(s) == want {
					t.Fatalf("len %d: flipping bit %d of byte %d leaves the hash as it was", n, bit, i)
				}
				buf[margin+i] ^= 1 << bit
			}
		}
	}
}

func TestLengthCounts(t *testing.T) {
	h := New[string]()
	seen := map[uint64]int{}
	zeros := string(make([]byte, 100))
	for n := range 101 {
		v := h.Sum(zeros[:n])
		if m, ok := seen[v]; ok {
			t.Fatalf("%d and %d zero bytes hash alike", m, n)
		}
		seen[v] = n
	}
}

func TestIntegers(t *testing.T) {
	checkIntegers[int8](t, 8)
	checkIntegers[uint16](t, 16)
	checkIntegers[int32](t, 32)
	checkIntegers[uint64](t, 64)
}

// checkIntegers checks that keys of K (bits wide) that differ in any one
// bit hash differently, around several values, negative ones among them.
func checkIntegers[K int8 | uint16 | int32 | uint64](t *testing.T, width int) {
	h := New[K]()
	for _, x := range []K{0, 1, K(rand.Uint64()), ^K(0), ^K(0) << (width - 1)} {
		want := h.Sum(x)
		for bit := range width {
			y := x ^ K(1)<<bit
			if h.Sum(y) == want {
				t.Errorf("%T: %v and %v hash alike", x, x, y)
			}
		}
	}
}

// TestSpreads checks that the bits the tables use spread keys that differ
// in a few digits evenly, and that every bit of a key moves about half the
// bits of the hash. The memory store takes its shard from the top bits,
// its index position from the low ones and its tag from bits 26 to 30;
// the denial cache takes its set from the top half.
func TestSpreads(t *testing.T) {
	h := New[string]()
	const keys, buckets = 1 << 17, 1 << 10
	var shard, pos, tag [buckets]int
	for i := range keys {
		v := h.Sum(fmt.Sprintf("user:%d", 1_000_000+i))
		shard[v>>(64-10)]++
		pos[v&(buckets-1)]++
		tag[v>>26&(1<<5-1)]++
	}
	for _, c := range []struct {
		name   string
		counts []int
	}{{"shard bits", shard[:]}, {"index bits", pos[:]}, {"tag bits", tag[:1<<5]}} {
		// χ² with k-1 degrees of freedom has mean k-1 and standard
		// deviation √(2(k-1)); allow 6 of them.
		k := float64(len(c.counts))
		expected := keys / k
		var chi2 float64
		for _, n := range c.counts {
			d := float64(n) - expected
			chi2 += d * d / expected
		}
		if limit := k - 1 + 6*math.Sqrt(2*(k-1)); chi2 > limit {
			t.Errorf("%s: χ² = %.0f over %d buckets, above %.0f", c.name, chi2, len(c.counts), limit)
		}
	}

	// Avalanche: flipping one bit of a 12-byte key flips 32 of the 64
	// bits of the hash on average (standard deviation 4 per key, 4/√500
	// over 500 keys; allow 1 bit, about 5.6 of them).
	const samples = 500
	for bit := range 12 * 8 {
		total := 0
		for range samples {
			b := []byte(fmt.Sprintf("user:%07d", rand.IntN(10_000_000)))
			before := h.Sum(string(b))
			b[bit/8] ^= 1 << (bit % 8)
			total += bits.OnesCount64(before ^ h.Sum(string(b)))
		}
		if mean := float64(total) / samples; mean < 31 || mean > 33 {
			t.Errorf("flipping bit %d of a key flips %.1f bits of its hash on average, want 32", bit, mean)
		}
	}
}

func TestSeedsDiffer(t *testing.T) {
	a, b := New[string](), New[string]()
	same := 0
	for i := range 100 {
		k := fmt.Sprintf("user:%d", i)
		if a.Sum(k) == b.Sum(k) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("two tables hash %d of 100 keys alike, want none", same)
	}
}

// BenchmarkSum compares Hasher with hash/maphash, which it replaces
// for strings and integers. Each hash picks the next key, so that the
// loop measures how long a decision waits for it rather than how many
// hashes overlap.
func BenchmarkSum(b *testing.B) {
	strs := make([]string, 1024)
	short := make([]string, 1024)
	long := make([]string, 1024)
	ints := make([]int64, 1024)
	for i := range strs {
		strs[i] = fmt.Sprintf("user:%d", 1_000_000+i)
		short[i] = fmt.Sprintf("ip:%d", 1000+i)
		long[i] = fmt.Sprintf("%040d", i)
		ints[i] = int64(i) << 20
	}
	seed := maphash.MakeSeed()
	str, i64 := New[string](), New[int64]()
	benchHash(b, "key=string7/hash=ours", short, str.Sum)
	benchHash(b, "key=string7/hash=maphash", short, func(k string) uint64 { return maphash.Comparable(seed, k) })
	benchHash(b, "key=string12/hash=ours", strs, str.Sum)
	benchHash(b, "key=string12/hash=maphash", strs, func(k string) uint64 { return maphash.Comparable(seed, k) })
	benchHash(b, "key=string40/hash=ours", long, str.Sum)
	benchHash(b, "key=string40/hash=maphash", long, func(k string) uint64 { return maphash.Comparable(seed, k) })
	benchHash(b, "key=int64/hash=ours", ints, i64.Sum)
	benchHash(b, "key=int64/hash=maphash", ints, func(k int64) uint64 { return maphash.Comparable(seed, k) })
}

func benchHash[K comparable](b *testing.B, name string, keys []K, hash func(K) uint64) {
	b.Run(name, func(b *testing.B) {
		var h uint64
		for b.Loop() {
			h = hash(keys[h%uint64(len(keys))])
		}
	})
}
