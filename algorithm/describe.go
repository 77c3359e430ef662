package algorithm

import "fmt"

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

// Describe returns what a state of Tag t holds, in words ("GCRA, burst
// 100, one every 36s"), when t's Kind is registered with a Describe, and
// otherwise its String ("G100,36000000").
func (t Tag) Describe() string {
	if k := kindOf(t.Kind); k != nil && k.Describe != nil {
		return k.Describe(t)
	}
	return t.String()
}
