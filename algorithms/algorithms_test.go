package algorithms_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/algorithms"
)

// TestEntries builds every configuration of every entry: each is valid,
// is the entry's algorithm (its Spec's name), and that algorithm's Kind
// is registered with its body.
func TestEntries(t *testing.T) {
	for _, e := range algorithms.All() {
		t.Run(e.Name, func(t *testing.T) {
			k, ok := algorithm.KindNamed(e.Name)
			if !ok || k.Body == "" {
				t.Fatalf("no Kind registered under %q with a body", e.Name)
			}
			configs := map[string]func() (algorithm.Algorithm, error){
				"Per":      func() (algorithm.Algorithm, error) { return e.Per(10, time.Second) },
				"Spread":   func() (algorithm.Algorithm, error) { return e.Spread(10, time.Second) },
				"Sample":   func() (algorithm.Algorithm, error) { return e.Sample(10) },
				"Allowed":  e.Bench.Allowed,
				"Generous": e.Bench.Generous,
				"Denied":   e.Bench.Denied,
			}
			for name, build := range configs {
				alg, err := build()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got := alg.Spec().Name; got != e.Name {
					t.Errorf("%s builds a %q", name, got)
				}
				if tag, _ := algorithm.TagOf(alg); tag.Kind != k.Letter {
					t.Errorf("%s: Tag %v, want the Kind %c", name, tag, k.Letter)
				}
			}
			if e.Bench.Prime < 1 {
				t.Errorf("Bench.Prime %d, want at least 1", e.Bench.Prime)
			}
		})
	}
	if _, _, err := algorithms.Route(); err != nil {
		t.Fatalf("Route: %v", err)
	}
}

func ExampleAll() {
	for _, e := range algorithms.All() {
		alg, err := e.Per(100, time.Minute)
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Name, alg.Limit())
	}
	// Output:
	// tokenbucket 100
	// tokenbucket-interval 100
	// slidinglog 100
	// fixedwindow 100
	// gcra 100
	// slidingwindow 100
}
