package nilness

import "testing"

type thing struct{ n int }

func (t *thing) Get() int { return t.n }

type getter interface{ Get() int }

func TestIs(t *testing.T) {
	var typed *thing
	var g getter = typed
	var m map[string]int
	var f func()
	for _, c := range []struct {
		name string
		v    any
		want bool
	}{
		{"untyped nil", nil, true},
		{"typed nil pointer", typed, true},
		{"typed nil in an interface", g, true},
		{"nil map", m, true},
		{"nil func", f, true},
		{"pointer", &thing{}, false},
		{"value", thing{}, false},
		{"int", 0, false},
		{"empty string", "", false},
	} {
		if got := Is(c.v); got != c.want {
			t.Errorf("Is(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
