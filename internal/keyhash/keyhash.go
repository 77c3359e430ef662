// Package keyhash hashes the keys of the tables this module keeps in
// memory: the memory store's index and the denial cache.
package keyhash

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"unsafe"
)

// Hasher hashes one table's keys. Create it with [New]; each Hasher draws
// secrets of its own.
//
// Keys whose type is an integer or a string of at most 16 bytes (named
// types too) are hashed by the wyhash construction, which Go's runtime
// uses for maps on machines without AES instructions: the key's bytes,
// read eight at a time, mixed with secrets drawn for each table by two
// 64×64→128-bit multiplications. hash/maphash reaches its hasher through
// a map type and runs AES rounds, which takes a few ns longer on such a
// key, and the hash is the first thing a decision waits for
// (BenchmarkSum; README). Longer strings go to maphash.String, which
// is as fast there. Like maphash's seed, the secrets are not known
// outside the process, so colliding keys cannot be prepared in advance;
// neither is a cryptographic hash.
//
// Every other key (floats, whose +0 and -0 are equal keys with different
// bits; interfaces; structs; arrays) goes to maphash.Comparable, which
// hashes equal keys alike whatever their bits.
type Hasher[K comparable] struct {
	kind    keyKind
	seed    maphash.Seed // for keyComparable, and strings of more than 16 bytes
	s, a, b uint64       // wyhash's seed and secrets
}

// keyKind is how a Hasher reads its keys.
type keyKind uint8

const (
	keyComparable keyKind = iota // maphash.Comparable
	keyString
	keyInt8 // integers by their size in bytes, which holds all their bits
	keyInt16
	keyInt32
	keyInt64
)

// New returns a Hasher of K keys.
func New[K comparable]() Hasher[K] {
	h := Hasher[K]{seed: maphash.MakeSeed(), s: rand.Uint64(), a: rand.Uint64() | 1, b: rand.Uint64() | 1}
	switch t := reflect.TypeFor[K](); t.Kind() {
	case reflect.String:
		h.kind = keyString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		h.kind = map[uintptr]keyKind{1: keyInt8, 2: keyInt16, 4: keyInt32, 8: keyInt64}[t.Size()]
	}
	return h
}

// Sum returns key's hash. Keys equal under == have equal hashes.
//
// A string of 9 to 16 bytes, as most keys are ("user:1000000"), is two
// overlapping words, read here without a loop or a call.
func (h *Hasher[K]) Sum(key K) uint64 {
	p := unsafe.Pointer(&key)
	switch h.kind {
	case keyString:
		s := *(*string)(p)
		if n := uint64(len(s)); n-9 <= 16-9 {
			b := unsafe.Pointer(unsafe.StringData(s))
			return h.mix(load64(b), load64(unsafe.Add(b, n-8)), n)
		}
		return h.string(s)
	case keyInt64:
		x := *(*uint64)(p)
		return h.mix(x, x, 8)
	case keyInt32:
		x := uint64(*(*uint32)(p))
		return h.mix(x, x, 4)
	case keyInt16:
		x := uint64(*(*uint16)(p))
		return h.mix(x, x, 2)
	case keyInt8:
		x := uint64(*(*uint8)(p))
		return h.mix(x, x, 1)
	}
	return maphash.Comparable(h.seed, key)
}

// string returns the hash of s when it is not 9 to 16 bytes long. A
// longer key goes to maphash, whose AES rounds take 16 bytes at a time
// in parallel where a multiplication would take 8.
func (h *Hasher[K]) string(s string) uint64 {
	p, n := unsafe.Pointer(unsafe.StringData(s)), uint64(len(s))
	var x, y uint64
	switch {
	case n > 16:
		return maphash.String(h.seed, s)
	case n == 0:
	case n < 4: // the first, middle and last bytes, some of them twice
		x = uint64(*(*byte)(p))<<16 | uint64(*(*byte)(unsafe.Add(p, n>>1)))<<8 | uint64(*(*byte)(unsafe.Add(p, n-1)))
	case n < 8: // two halves that overlap when n < 8
		x, y = load32(p), load32(unsafe.Add(p, n-4))
	default: // 8
		x = load64(p)
		y = x
	}
	return h.mix(x, y, n)
}

// mix is the hash of n bytes read as the words x and y.
func (h *Hasher[K]) mix(x, y, n uint64) uint64 {
	return mul(h.b^n, mul(x^h.a, y^h.s))
}

// mul folds the 128-bit product of x and y to 64 bits.
func mul(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

// load64 reads the 8 bytes at p, in one load where the machine allows
// unaligned loads.
func load64(p unsafe.Pointer) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice((*byte)(p), 8))
}

// load32 reads the 4 bytes at p.
func load32(p unsafe.Pointer) uint64 {
	return uint64(binary.LittleEndian.Uint32(unsafe.Slice((*byte)(p), 4)))
}
