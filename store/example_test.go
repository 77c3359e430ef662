package store_test

import (
	"fmt"
	"net/netip"

	"github.com/go-ratelimit/ratelimit/store"
)

// A store that keeps keys as bytes (the Redis stores) encodes them with
// DefaultKeyEncoder unless told otherwise.
func ExampleDefaultKeyEncoder() {
	type UserID int64 // a named integer is encoded as an integer
	encodeUser, err := store.DefaultKeyEncoder[UserID]()
	if err != nil {
		panic(err)
	}
	encodeAddr, err := store.DefaultKeyEncoder[netip.Addr]()
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", encodeUser(nil, 42))
	fmt.Printf("%s\n", encodeAddr(nil, netip.MustParseAddr("2001:db8::1")))

	_, err = store.DefaultKeyEncoder[struct{ a, b int }]()
	fmt.Println(err)
	// Output:
	// 42
	// 2001:db8::1
	// ratelimit: no default encoding for this key type: struct { a int; b int } (supply a KeyEncoder)
}
