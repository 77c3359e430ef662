package ratelimit

import (
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
)

// wrapping is what the options put in front of every table a Limiter or
// Policy opens: one circuit breaker for the store, shared by every table
// opened on it (the limits may change; the store's health does not), and
// a denial cache per table, since a denial holds only for the limits that
// made it.
type wrapping[K comparable] struct {
	breaker *breaker // nil without WithBreaker
	micros  clock.Micros
	denials int             // the denial cache's size; 0 without WithDenialCache
	calls   *remoteCalls[K] // the remote calls (remoteTable), shared by every table
}

// newWrapping checks the options' breaker and denial cache.
func newWrapping[K comparable](o *options, micros clock.Micros) (*wrapping[K], error) {
	w := &wrapping[K]{micros: micros, calls: newRemoteCalls[K]()}
	if o.breaker != nil {
		b, err := o.breaker.check()
		if err != nil {
			return nil, err
		}
		w.breaker = newBreaker(b)
	}
	if o.denialCache {
		if _, err := newDenialCache[K](o.denials); err != nil {
			return nil, err
		}
		w.denials = o.denials
	}
	return w, nil
}

// wrap puts the breaker, the detaching of remote calls and a new denial
// cache in front of t: the denial cache first, since its answers need no
// store, then, for a remote table (store.Remote), the detaching of its
// calls from the caller's cancellation (remoteTable), then the circuit
// breaker, which guards the store's calls and so counts their own
// outcomes, not the callers' impatience.
func (w *wrapping[K]) wrap(t store.Table[K]) store.Table[K] {
	raw := t
	if w.breaker != nil {
		t = &breakerTable[K]{next: t, b: w.breaker, micros: w.micros}
	}
	if _, isRemote := raw.(store.Remote); isRemote {
		t = newRemoteTable(t, raw, w.calls)
	}
	if w.denials != 0 {
		c, _ := newDenialCache[K](w.denials) // checked by newWrapping
		t = &denialTable[K]{next: t, cache: c}
	}
	return t
}
