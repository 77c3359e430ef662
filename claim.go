package ratelimit

import (
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/nilness"
	"github.com/go-ratelimit/ratelimit/store"
)

// ErrStateInUse reports a limit built apart from a live one on the same store
// value with an equal default state ID: they would share a quota unasked. Share
// one Limiter or Policy, or give state IDs (WithStateID, Limit.StateID).
var ErrStateInUse = fmt.Errorf("%w: a default state ID is in use by another limiter on this store", ErrInvalidConfig)

// owner stands for one Limiter or Policy built with New or NewPolicy, or
// for one Limiter of With, which is of the same family as the Limiter it
// came from: limits of one family share state on purpose. The claims
// registry holds owners weakly: once one is unreachable, its claims are
// free.
type owner struct {
	what   string // "a Limiter" or "a Policy", with its name
	at     string // where it was built, file:line
	family uint64 // the Limiter's or Policy's, shared by the Limiters of its With
}

// families numbers the Limiters and Policies built, for owner.family.
var families atomic.Uint64

// claimKey is a default state ID on one store value.
type claimKey struct {
	st any
	id string
}

// claims records the default state IDs that live owners use, per store
// value. An entry holds its store value, which its owner's Limiters hold
// anyway; it is removed when its owner is collected (runtime.AddCleanup).
var claims struct {
	mu sync.Mutex
	m  map[claimKey]weak.Pointer[owner]
}

// newOwner returns the owner of a Limiter or Policy, built where the
// caller's caller is (skip is 1), or further up (see runtime.Caller).
func newOwner(what, name string, skip int) *owner {
	o := &owner{what: what, at: "an unknown place", family: families.Add(1)}
	if name != "" {
		o.what += fmt.Sprintf(" named %q", name)
	}
	if _, file, line, ok := runtime.Caller(skip + 1); ok {
		o.at = fmt.Sprintf("%s:%d", filepath.Base(file), line)
	}
	return o
}

// claimStore records that own decides limits on st, of which those
// marked implicit have their algorithm's default state ID
// (store.DefaultID). It returns an error wrapping ErrStateInUse and
// ErrInvalidConfig, claiming nothing, when an owner of another family
// that is still reachable holds one of those IDs on st; otherwise it
// returns the claims made, for unclaimAll. An owner dropped but not yet
// collected still holds its claims: a Limiter built anew per request, or
// on a reload, names its state to share it (docs/design/sharing.md).
func claimStore(st any, own *owner, limits []store.Limit, implicit []bool) ([]claimKey, error) {
	if nilness.Is(st) || store.CheckLimits(limits) != nil {
		return nil, nil // opening them reports it
	}
	if !reflect.ValueOf(st).Comparable() {
		for i := range limits {
			if implicit[i] {
				return nil, fmt.Errorf("%w: the store, a %T, is not comparable, so the library cannot tell whether another limiter uses the default state ID %q of %s on it: give the limit a state ID (WithStateID, Limit.StateID)",
					ErrStateInUse, st, limits[i].ID, algorithm.Describe(limits[i].Algorithm))
			}
		}
		return nil, nil
	}
	claims.mu.Lock()
	defer claims.mu.Unlock()
	if claims.m == nil {
		claims.m = make(map[claimKey]weak.Pointer[owner])
	}
	for i, l := range limits {
		if o := claims.m[claimKey{st, l.ID}].Value(); implicit[i] && o != nil && o.family != own.family {
			// Equal default IDs mean equal configurations: l says what o's is.
			return nil, fmt.Errorf("%w: %s built at %s and %s built at %s would share each key's quota on this store: both have the default state ID %q of %s; "+
				"use one Limiter or Policy for both, or give them state IDs (WithStateID, Limit.StateID), the same to share, different ones to keep them apart",
				ErrStateInUse, o.what, o.at, own.what, own.at, l.ID, algorithm.Describe(l.Algorithm))
		}
	}
	var made []claimKey
	for i, l := range limits {
		k := claimKey{st, l.ID}
		if o := claims.m[k].Value(); !implicit[i] || o != nil && o.family == own.family {
			continue
		}
		claims.m[k] = weak.Make(own)
		runtime.AddCleanup(own, unclaim, k)
		made = append(made, k)
	}
	return made, nil
}

// with returns the owner of a Limiter of o's With: of o's family,
// but its own, so that its claims are free once it is dropped.
func (o *owner) with() *owner {
	return &owner{what: o.what, at: o.at, family: o.family}
}

// heldBy returns the owner of own's family that holds id on st, so that
// Limiters of one With that use id share its claim, which lasts while
// any of them lives; or own when none does.
func heldBy(st any, id string, own *owner) *owner {
	if nilness.Is(st) || !reflect.ValueOf(st).Comparable() {
		return own
	}
	claims.mu.Lock()
	defer claims.mu.Unlock()
	if o := claims.m[claimKey{st, id}].Value(); o != nil && o.family == own.family {
		return o
	}
	return own
}

// unclaim removes the claim of k when its owner is gone: run when an
// owner is collected, or when building it failed.
func unclaim(k claimKey) {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	if c, ok := claims.m[k]; ok && c.Value() == nil {
		delete(claims.m, k)
	}
}

// unclaimAll gives back the claims own made, when building its Limiter
// or Policy failed after claiming.
func unclaimAll(own *owner, made []claimKey) {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	for _, k := range made {
		if c, ok := claims.m[k]; ok && c.Value() == own {
			delete(claims.m, k)
		}
	}
}
