package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
)

// A limit's name is its quota (docs/sharing.md): the state ID its store
// keeps each key's state under. A Limiter's is its WithName; a Policy's
// limit's is the Policy's WithName, '/' and the limit's Name. Limits of
// one name on one store backend share each key's state, whoever built
// them; a change of numbers under a name carries it (WithInheritance).
//
// A limit without a name on a store.Local store is a quota of its own: an
// ID taken from a counter, unique in the process, that starts with a byte
// no name holds. On any other store it is refused: other processes or
// store values on the same backend could not tell which quota it is.

// maxNameBytes is the longest name of a quota, in bytes, a Policy's name
// and a limit's together.
const maxNameBytes = 256

// unnamedPrefix starts the ID of every unnamed limit: its NUL is a
// control character, which no name holds.
const unnamedPrefix = "\x00unnamed-"

// unnamed counts the IDs given to unnamed Limiters and Policies.
var unnamed atomic.Uint64

// checkName returns an error wrapping ErrInvalidConfig when name cannot
// name a quota: empty, longer than maxNameBytes, not valid UTF-8, or
// holding a control character.
func checkName(name string) error {
	why := ""
	switch {
	case name == "":
		why = "is empty"
	case len(name) > maxNameBytes:
		why = fmt.Sprintf("is %d bytes long; a quota's name has at most %d", len(name), maxNameBytes)
	case !utf8.ValidString(name):
		why = "is not valid UTF-8"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		why = "holds a control character"
	default:
		return nil
	}
	return fmt.Errorf("%w: the name %q %s", ErrInvalidConfig, name, why)
}

// quotaID returns the ID of the quota of a Limiter or Policy (what) built
// with o on st: its name, or when it has none an ID of its own on a
// store.Local store (a nil one too, which opening it reports), or an error
// wrapping ErrInvalidConfig on any other store.
func quotaID(st any, o *options, what string) (string, error) {
	if o.named {
		return o.hooks.name, nil
	}
	if l, ok := st.(store.Local); ok && l.Local() || nilness.Is(st) {
		return unnamedPrefix + strconv.FormatUint(unnamed.Add(1), 10), nil
	}
	return "", fmt.Errorf("%w: %s on a %T needs a name: that store may be shared with other processes or store values, "+
		"where a limit's name is its quota; give it one with WithName, the same wherever it is to be shared", ErrInvalidConfig, what, st)
}

// limitID returns the ID of the quota of a Policy's limit i named name
// (not empty), the Policy's quota being policy.
func limitID(policy string, i int, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", fmt.Errorf("limit %d: %w", i, err)
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: limit %d: the name %q holds '/', which separates the Policy's name from its limits'", ErrInvalidConfig, i, name)
	}
	id := policy + "/" + name
	if len(id) > maxNameBytes && !strings.HasPrefix(id, unnamedPrefix) {
		return "", fmt.Errorf("%w: limit %d: the quota %q is %d bytes long; a quota's name has at most %d", ErrInvalidConfig, i, id, len(id), maxNameBytes)
	}
	return id, nil
}
