package algorithm_test

import (
	"strings"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// body is a small body that keeps the composition contract: two
// parameters, a setup, a state parsed and encoded.
const body = `-- A test body.
--#setup limit
local limit = tonumber(ARGV[$1])
--#setupend
local n = 0
--#parse n
n = tonumber(string.sub(state, at)) or 0
--#parsed
local fits = n < limit
local id = ARGV[$id] .. ARGV[$hdr] .. tonumber(ARGV[$2]) .. '$n'
--@report
remaining = limit - n
--@commit
--#encode n
value = ARGV[$hdr] .. n
--@book
--@refund
`

// TestCheckBody checks a body that keeps the contract, and bodies broken
// one way each, against the error that says what is wrong.
func TestCheckBody(t *testing.T) {
	if err := algorithm.CheckBody(body); err != nil {
		t.Fatalf("CheckBody of a good body: %v", err)
	}
	for _, c := range []struct{ name, old, new, want string }{
		{"no report", "--@report\n", "", "want --@report and --@commit"},
		{"commit first", "--@report\nremaining = limit - n\n--@commit\n", "--@commit\n--@report\nremaining = limit - n\n", "want --@report and --@commit after the decide part"},
		{"unknown part", "--@book\n", "--@borrow\n", "unknown part --@borrow"},
		{"repeated part", "--@refund\n", "--@refund\n--@refund\n", "part --@refund repeated"},
		{"foreign ARGV", "ARGV[$1]", "ARGV[1]", "ARGV[1]: a body reads only its limit's arguments"},
		{"KEYS", "ARGV[$id] ..", "KEYS[1] ..", "line 10: KEYS"},
		{"unknown reference", "'$n'", "$key", "$key: a body reads"},
		{"parameter 10", "ARGV[$2]", "ARGV[$12]", "$12"},
		{"setup unclosed", "--#setupend\n", "", "--#setup and --#setupend come in pairs"},
		{"setup not a name", "--#setup limit\n", "--#setup limit,cap\n", `"limit,cap" is not a Lua name`},
		{"parse unclosed", "--#parsed\n", "", "needs --#parse, --#parsed and --#encode"},
		{"no encode", "--#encode n\n", "", "needs --#parse, --#parsed and --#encode"},
		{"encode outside commit", "--#encode n\nvalue = ARGV[$hdr] .. n\n--@book\n", "--@book\n--#encode n\nvalue = ARGV[$hdr] .. n\n", "--#encode must be in the commit part"},
		{"encode sets nothing", "value = ARGV[$hdr] .. n", "v = n", "does not set value"},
		{"numbers differ", "--#encode n\n", "--#encode n, m\n", "not as many numbers"},
		{"decide sets no fits", "local fits = n < limit", "local ok = n < limit", "does not set fits"},
		{"unknown mark", "--#parsed\n", "--#parsed\n--#load\n", "unknown mark --#load"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken := strings.Replace(body, c.old, c.new, 1)
			if broken == body {
				t.Fatalf("the case changes nothing: %q not in the body", c.old)
			}
			err := algorithm.CheckBody(broken)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckBody: got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestRegister checks what Register refuses, with the error that says
// why, and that every algorithm of the module is registered once.
func TestRegister(t *testing.T) {
	used := func(algorithm.Tag, algorithm.State, int64) int64 { return 0 }
	for _, c := range []struct {
		k    algorithm.Kind
		want string
	}{
		{algorithm.Kind{Name: "Test", Letter: 'Z', Params: 1, Used: used}, "the name must be"},
		{algorithm.Kind{Name: "test", Letter: 'z', Params: 1, Used: used}, "not a capital ASCII letter"},
		{algorithm.Kind{Name: "test", Letter: 'Z', Params: 3, Used: used}, "1 or 2 meaning parameters"},
		{algorithm.Kind{Name: "test", Letter: 'Z', Params: 1}, "no Used"},
		{algorithm.Kind{Name: "test", Letter: 'Z', Params: 1, Used: used, Body: "x = 1\n"}, `Register "test": test.lua: the parts are []`},
		{algorithm.Kind{Name: "gcra", Letter: 'Z', Params: 1, Used: used}, "taken"},
		{algorithm.Kind{Name: "test", Letter: tokenbucket.Kind, Params: 1, Used: used}, "taken"},
	} {
		got := func() (msg string) {
			defer func() { msg = fmtRecover(recover()) }()
			algorithm.Register(c.k)
			return ""
		}()
		if !strings.Contains(got, c.want) {
			t.Errorf("Register(%q, %q): panicked with %q, want a message saying %q", c.k.Name, c.k.Letter, got, c.want)
		}
	}
	kinds := algorithm.Kinds()
	all := algorithms.All()
	if len(kinds) != len(all) {
		t.Fatalf("%d Kinds registered, %d algorithms listed", len(kinds), len(all))
	}
	for _, e := range all {
		k, ok := algorithm.KindNamed(e.Name)
		if !ok {
			t.Fatalf("%s: listed, not registered", e.Name)
		}
		alg, err := e.Sample(10)
		if err != nil {
			t.Fatal(err)
		}
		if tag, _ := algorithm.TagOf(alg); tag.Kind != k.Letter || alg.Spec().Name != k.Name {
			t.Errorf("%s: its Tag is %v and its Spec %q, its Kind %c %q", e.Name, tag, alg.Spec().Name, k.Letter, k.Name)
		}
	}
}

// fmtRecover returns what a recovered panic says, "" for none.
func fmtRecover(r any) string {
	switch r := r.(type) {
	case nil:
		return ""
	case error:
		return r.Error()
	case string:
		return r
	}
	return "a panic of another type"
}
