package algorithm

import (
	"fmt"
	"sync"
)

// Describer is an algorithm that says what it is in words, for errors
// ("a token bucket of 100 refilled in 1s"). The six algorithms of this
// module implement it.
type Describer interface {
	Describe() string
}

// Describe returns alg in words: its Describe when it is a Describer,
// otherwise its String (fmt's %v).
func Describe(alg Algorithm) string {
	if d, ok := alg.(Describer); ok {
		return d.Describe()
	}
	return fmt.Sprint(alg)
}

// kinds holds what each Kind's package registered: how to put a Tag of
// that Kind in words.
var kinds sync.Map // byte → func(Tag) string

// RegisterKind registers describe as the way to put a Tag of kind in
// words (Tag.Describe). An algorithm's package calls it from its init, as
// image.RegisterFormat is called, so that no shared code lists the Kinds.
func RegisterKind(kind byte, describe func(Tag) string) {
	kinds.Store(kind, describe)
}

// Describe returns what a state of Tag t holds, in words ("GCRA, burst
// 100, one every 36s"), when t's Kind was registered (RegisterKind: its
// package is linked in), and otherwise its String ("G100,36000000").
func (t Tag) Describe() string {
	if f, ok := kinds.Load(t.Kind); ok {
		return f.(func(Tag) string)(t)
	}
	return t.String()
}
