package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/redisstore"
)

// The key layout, written out: a change of it, which would orphan every
// key already stored, fails here.
const (
	prefix = "rl:"
	suffix = "#" // a key's hash follows the braces
)

// TestKeyProperties draws keys from an alphabet rich in the bytes that
// matter, so that any collision of the escaping would be found: each key
// decodes back to itself, its hash tag is the whole encoded key, and two
// keys share a name only when they are one.
func TestKeyProperties(t *testing.T) {
	table := keyTable(t)
	alphabet := []byte{'{', '}', '\\', ')', 'a', 0, 0xff}
	key := rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 12).Draw(t, "bytes"))
	})
	rapid.Check(t, func(rt *rapid.T) {
		a, b := key.Draw(rt, "a"), key.Draw(rt, "b")
		ka, kb := checkKey(rt, table, a), checkKey(rt, table, b)
		if (ka == kb) != (a == b) {
			rt.Fatalf("Key(%q) = %q, Key(%q) = %q", a, ka, b, kb)
		}
	})
}

// keyTable returns a table of a fixed window under the prefix rl:, over
// a Runner that runs nothing: only its key names are asked for.
func keyTable(t *testing.T) *redisstore.Table[string] {
	st, err := redisstore.New[string](nopRunner{}, redisstore.WithPrefix[string](prefix))
	if err != nil {
		t.Fatal(err)
	}
	alg, err := fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	table, err := st.Open(store.LimitsOf(alg), clock.Local())
	if err != nil {
		t.Fatal(err)
	}
	return table.(*redisstore.Table[string])
}

// checkKey returns the name of key's hash, after checking that it decodes
// back to key and that its hash tag is the whole encoded key, never empty.
func checkKey(t *rapid.T, table *redisstore.Table[string], key string) string {
	got, err := table.Key(key)
	if err != nil {
		t.Fatalf("Key(%q): %v", key, err)
	}
	if !strings.HasPrefix(got, prefix+"{") || !strings.HasSuffix(got, "}"+suffix) {
		t.Fatalf("key %q: want %q + \"{\" + encoded key + \"}\" + %q", got, prefix, suffix)
	}
	encoded := got[len(prefix)+1 : len(got)-len(suffix)-1]
	if back := decode(t, encoded); back != key {
		t.Fatalf("Key(%q) = %q, which decodes to %q", key, got, back)
	}
	if tag := hashTag(got); tag == "" || tag != encoded {
		t.Fatalf("Key(%q) = %q: the hash tag is %q, want the whole encoded key %q", key, got, tag, encoded)
	}
	return got
}

// decode inverts the escaping inside the braces of a key, or fails.
func decode(t *rapid.T, inner string) string {
	if inner == `\` {
		return "" // the empty key's own tag
	}
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		switch c := inner[i]; {
		case c == '}':
			t.Fatalf("%q: an unescaped '}' inside the braces", inner)
		case c != '\\':
			b.WriteByte(c)
		case i+1 < len(inner) && inner[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case i+1 < len(inner) && inner[i+1] == ')':
			b.WriteByte('}')
			i++
		default:
			t.Fatalf("%q: a lone '\\' at %d", inner, i)
		}
	}
	return b.String()
}

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the first '}' after it, when that is not empty.
func hashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return key
	}
	return key[s+1 : s+1+e]
}

// nopRunner runs nothing.
type nopRunner struct{}

func (nopRunner) Eval(context.Context, *redisstore.Script, bool, []string, redisstore.Args, []int64) ([]int64, error) {
	return nil, nil
}

func (nopRunner) EvalStrings(context.Context, *redisstore.Script, []string, []string) ([]string, error) {
	return nil, nil
}

func (nopRunner) Del(context.Context, []string) error { return nil }
