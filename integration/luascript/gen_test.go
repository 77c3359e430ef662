package luascript_test

import "strings"

// testNonce is the nonce the tests' bookings pass (luascript.OpBook): the
// generation a state gets from the first booking that charges it is
// testGen, after its header.
const (
	testNonce = "t1"
	testGen   = ";" + testNonce
)

// noGen returns a state's value without its generation, as Go's mirrors
// write it.
func noGen(v string) string { return strings.Replace(v, testGen+":", ":", 1) }
