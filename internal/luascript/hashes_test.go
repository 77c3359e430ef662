package luascript

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var recordHashes = flag.Bool("record-hashes", false, "rewrite testdata/script-hashes.txt from the current composer")

// hashConfigs returns the lists of algorithms whose scripts
// TestScriptHashes hashes: every algorithm alone, every ordered pair,
// threes and fours (nested), fives and sixes (closures in locals), and
// 25 and 30 limits (closures in tables), with logs alone and mixed.
func hashConfigs() [][]string {
	algs := []string{"tokenbucket", "tokenbucket-interval", "slidinglog", "fixedwindow", "gcra", "slidingwindow"}
	var out [][]string
	for _, a := range algs {
		out = append(out, []string{a})
	}
	for _, a := range algs {
		for _, b := range algs {
			out = append(out, []string{a, b})
		}
	}
	cycle := func(n, from int) []string {
		names := make([]string, n)
		for i := range names {
			names[i] = algs[(from+i)%len(algs)]
		}
		return names
	}
	for from := range algs {
		out = append(out, cycle(3, from), cycle(4, from))
	}
	out = append(out,
		[]string{"slidinglog", "slidinglog", "slidinglog"},
		[]string{"gcra", "slidinglog", "fixedwindow"},
		[]string{"gcra", "gcra", "gcra", "gcra"},
		cycle(5, 0), cycle(5, 2), cycle(6, 0), cycle(6, 3),
		[]string{"slidinglog", "slidinglog", "slidinglog", "slidinglog", "slidinglog", "slidinglog"},
		cycle(24, 1), cycle(25, 0), cycle(30, 4),
	)
	return out
}

// composedScripts returns every script the composer makes for names:
// the decision script, its batch, each op's script and its batch.
func composedScripts(names []string) []*Script {
	d := compose(names)
	out := []*Script{d, Batch(d)}
	for _, op := range []Op{OpBook, OpRefund, OpCancel} {
		s := composeOp(op, names)
		out = append(out, s, OpBatch(s))
	}
	return out
}

// TestScriptHashes holds the composer to the scripts it made before its
// refactoring into stages, byte for byte: the SHA-256 of every script of
// hashConfigs is in testdata/script-hashes.txt (go test -run
// TestScriptHashes -record-hashes rewrites it).
func TestScriptHashes(t *testing.T) {
	got := map[string]string{}
	var order []string
	add := func(s *Script) {
		sum := sha256.Sum256([]byte(s.Source))
		if _, ok := got[s.Name]; !ok {
			order = append(order, s.Name)
		}
		got[s.Name] = hex.EncodeToString(sum[:])
	}
	add(Reset)
	for _, names := range hashConfigs() {
		for _, s := range composedScripts(names) {
			add(s)
		}
	}
	const file = "testdata/script-hashes.txt"
	if *recordHashes {
		var b strings.Builder
		for _, name := range order {
			fmt.Fprintf(&b, "%s %s\n", got[name], name)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, _ := strings.Cut(sc.Text(), " ")
		want[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, name := range order {
		if want[name] != got[name] {
			bad = append(bad, name)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			bad = append(bad, name+" (no longer made)")
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("%d of %d scripts differ from %s:\n%s", len(bad), len(want), file, strings.Join(bad, "\n"))
	}
}
