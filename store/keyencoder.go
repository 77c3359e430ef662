package store

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"unsafe"
)

// ErrKeyType reports a key type with no default encoding; give the store
// an encoder of your own.
var ErrKeyType = errors.New("ratelimit: no default encoding for this key type")

// KeyEncoder appends the encoding of key to dst and returns the extended
// slice. Remote stores use it to name a key's state; it must be injective
// (different keys, different encodings) and should not allocate.
type KeyEncoder[K comparable] func(dst []byte, key K) []byte

// DefaultKeyEncoder returns the encoding used when none is given: strings
// as their bytes, integers in decimal, netip.Addr and netip.Prefix in their
// text form (an invalid prefix as its address followed by "/-1"). Types
// whose underlying type is a string or an integer (type UserID string) are
// encoded as that type. For any other K it returns an error wrapping
// ErrKeyType.
func DefaultKeyEncoder[K comparable]() (KeyEncoder[K], error) {
	var zero K
	switch any(zero).(type) {
	case netip.Addr:
		return func(dst []byte, k K) []byte { return (*(*netip.Addr)(unsafe.Pointer(&k))).AppendTo(dst) }, nil
	case netip.Prefix:
		return func(dst []byte, k K) []byte {
			p := *(*netip.Prefix)(unsafe.Pointer(&k))
			if !p.IsValid() {
				// Every invalid prefix prints as "invalid Prefix" (the zero
				// one as nothing); keep their addresses apart.
				return append(p.Addr().AppendTo(dst), "/-1"...)
			}
			return p.AppendTo(dst)
		}, nil
	}
	// The key's type has the layout of its underlying kind, checked here
	// once, so the encoders read it in place rather than boxing each key.
	switch reflect.TypeFor[K]().Kind() {
	case reflect.String:
		return func(dst []byte, k K) []byte { return append(dst, *(*string)(unsafe.Pointer(&k))...) }, nil
	case reflect.Int:
		return func(dst []byte, k K) []byte { return strconv.AppendInt(dst, int64(*(*int)(unsafe.Pointer(&k))), 10) }, nil
	case reflect.Int8:
		return func(dst []byte, k K) []byte { return strconv.AppendInt(dst, int64(*(*int8)(unsafe.Pointer(&k))), 10) }, nil
	case reflect.Int16:
		return func(dst []byte, k K) []byte { return strconv.AppendInt(dst, int64(*(*int16)(unsafe.Pointer(&k))), 10) }, nil
	case reflect.Int32:
		return func(dst []byte, k K) []byte { return strconv.AppendInt(dst, int64(*(*int32)(unsafe.Pointer(&k))), 10) }, nil
	case reflect.Int64:
		return func(dst []byte, k K) []byte { return strconv.AppendInt(dst, *(*int64)(unsafe.Pointer(&k)), 10) }, nil
	case reflect.Uint:
		return func(dst []byte, k K) []byte { return strconv.AppendUint(dst, uint64(*(*uint)(unsafe.Pointer(&k))), 10) }, nil
	case reflect.Uint8:
		return func(dst []byte, k K) []byte {
			return strconv.AppendUint(dst, uint64(*(*uint8)(unsafe.Pointer(&k))), 10)
		}, nil
	case reflect.Uint16:
		return func(dst []byte, k K) []byte {
			return strconv.AppendUint(dst, uint64(*(*uint16)(unsafe.Pointer(&k))), 10)
		}, nil
	case reflect.Uint32:
		return func(dst []byte, k K) []byte {
			return strconv.AppendUint(dst, uint64(*(*uint32)(unsafe.Pointer(&k))), 10)
		}, nil
	case reflect.Uint64:
		return func(dst []byte, k K) []byte { return strconv.AppendUint(dst, *(*uint64)(unsafe.Pointer(&k)), 10) }, nil
	}
	return nil, fmt.Errorf("%w: %v (supply a KeyEncoder)", ErrKeyType, reflect.TypeFor[K]())
}
