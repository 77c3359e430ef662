package algorithm

import (
	"fmt"
	"strconv"
)

// Tag names what a state's numbers mean: the algorithm that wrote them
// (Kind) and the parameters they depend on (its meaning parameters),
// which are fewer than its configuration: a token bucket's tokens mean
// the same whatever its rate, so its Tag holds its capacity alone. Two
// configurations with equal Tags read each other's states as they are;
// a state written under another Tag of the same Kind is converted by an
// [Inheritor]; a state of another Kind is read only for what it had used
// ([Used], [Carry]), when a limit resets on mismatch (stores report
// store.ErrStateMismatch otherwise).
//
// Stores keep a Tag beside each state (the Redis stores write its
// [Tag.Header] in front of the value). A Tag is a small value: comparing
// two costs three compares and no allocation.
type Tag struct {
	// Kind is the algorithm's letter, its registered [Kind]'s Letter; 0
	// for an algorithm that has no Tag (one written outside this module).
	Kind byte
	// P0 and P1 are the meaning parameters, as each algorithm's Tag
	// method says; P1 is 0 for the Kinds that have one.
	P0, P1 int64
}

// params returns how many meaning parameters a Kind has: 1 or 2, or 0
// for a Kind no package registered.
func params(kind byte) int {
	if k := kindOf(kind); k != nil {
		return k.Params
	}
	return 0
}

// Header is the Tag as the Redis stores write it in front of a state: the
// Kind's letter, the meaning parameters in decimal separated by a comma,
// then ':' ("T100:", "G10,600000:"). No header is a prefix of another, and
// the letter is also the format's version: a later format takes another
// letter. A Tag of an unknown Kind has no header ("").
func (t Tag) Header() string {
	n := params(t.Kind)
	if n == 0 {
		return ""
	}
	b := make([]byte, 0, 24)
	b = append(b, t.Kind)
	b = strconv.AppendInt(b, t.P0, 10)
	if n == 2 {
		b = append(b, ',')
		b = strconv.AppendInt(b, t.P1, 10)
	}
	return string(append(b, ':'))
}

// String describes the Tag, for errors and logs: its header without the colon.
func (t Tag) String() string {
	if h := t.Header(); h != "" {
		return h[:len(h)-1]
	}
	return fmt.Sprintf("kind %d", t.Kind)
}

// Tagged is an algorithm that says what its states mean. The six
// algorithms of this module implement it; a store deciding for an
// algorithm that does not treats only a state written under the same
// Spec as its own.
type Tagged interface {
	Algorithm
	// Tag returns the algorithm's Tag; it is the same on every call.
	Tag() Tag
}

// TagOf returns alg's Tag, or the zero Tag and false when alg is not
// [Tagged].
func TagOf(alg Algorithm) (Tag, bool) {
	if t, ok := alg.(Tagged); ok {
		return t.Tag(), true
	}
	return Tag{}, false
}

// Rule is how a state written under another Tag of the same Kind is
// carried into an algorithm's own terms, when a limit changes on live
// keys. Under either rule tightening never grants a fresh quota, every
// number stays within the new limit, and no duration is negative.
type Rule uint8

const (
	// AsIs carries what was used: what was used stays used, clamped to
	// the new limit, so that what remains is the new limit less what was
	// used (and never below 0). Widening a limit admits at once what the
	// new limit allows. It is the default.
	AsIs Rule = iota
	// Proportional carries the fraction used: a key that had used half of
	// the old limit has used half of the new one. Rounding counts toward
	// more used. The sliding log, whose entries are instants and costs,
	// has no fraction to carry, and refuses it (ErrInvalidConfig).
	Proportional
)

// String returns "as-is" or "proportional".
func (r Rule) String() string {
	switch r {
	case AsIs:
		return "as-is"
	case Proportional:
		return "proportional"
	}
	return fmt.Sprintf("Rule(%d)", uint8(r))
}

// CheckRule returns an error wrapping ErrInvalidConfig when alg cannot
// carry states by rule: an unknown rule, or Proportional for an algorithm
// whose Kind keeps a Log.
func CheckRule(alg Algorithm, rule Rule) error {
	if rule > Proportional {
		return fmt.Errorf("%w: unknown inheritance rule %d", ErrInvalidConfig, uint8(rule))
	}
	if t, _ := TagOf(alg); rule == Proportional {
		if k := kindOf(t.Kind); k != nil && k.Log {
			return fmt.Errorf("%w: %s carries its entries as they are; it has no proportional rule", ErrInvalidConfig, k.Name)
		}
	}
	return nil
}

// Inheritor is a Tagged algorithm that converts states written under
// another Tag of its Kind (other limits, windows, capacities) into its
// own terms. Stores call it when they read such a state, before deciding;
// only an admission writes the converted state back (with the reader's
// Tag), so that a store's decisions do not depend on whether a denial
// persisted it.
type Inheritor interface {
	Tagged
	// Inherit returns s, a state written at or before now under from (of
	// the algorithm's own Kind, and another Tag), as this algorithm's
	// state at now by rule. Its result is a state the algorithm's Take and
	// Peek accept as their own.
	Inherit(from Tag, s State, now int64, rule Rule) State
}
