package store_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// TestDefaultID pins the IDs of two configurations, since a change would
// orphan every key stored under them, and checks that configurations
// differing in name or any parameter get different IDs.
func TestDefaultID(t *testing.T) {
	for spec, want := range map[*algorithm.Spec]string{
		{Name: "fixedwindow", Params: []float64{5, 1e6}}: "243609ca",
		{Name: "tokenbucket", Params: []float64{10, 1}}:  "8c5f0ad5",
	} {
		if got := store.DefaultID(*spec); got != want {
			t.Errorf("DefaultID(%v) = %q, want %q", *spec, got, want)
		}
	}
	specs := []algorithm.Spec{
		{Name: "tokenbucket", Params: []float64{10, 1}},
		{Name: "tokenbucket", Params: []float64{10, 2}},
		{Name: "tokenbucket", Params: []float64{100, 1}},
		{Name: "tokenbucket", Params: []float64{1, 10}},
		{Name: "gcra", Params: []float64{10, 1}},
		{Name: "tokenbucket-interval", Params: []float64{10, 1, 1}},
		{Name: "slidinglog", Params: []float64{10, 1}},
		{Name: "fixedwindow", Params: []float64{10, 1}},
		{Name: "slidingwindow", Params: []float64{10, 1}},
	}
	seen := map[string]algorithm.Spec{}
	for _, s := range specs {
		id := store.DefaultID(s)
		if prev, dup := seen[id]; dup {
			t.Errorf("%v and %v share the ID %q", prev, s, id)
		}
		seen[id] = s
	}
}
