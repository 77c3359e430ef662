package memorystore

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

// registry numbers a store's identities (store.Limit.ID) and configs (an
// algorithm's Spec), so that an entry names the state it holds in 8
// bytes: its identity's number and the number of the config that wrote
// it. Both are append-only. Open interns under mu; decisions, sweeps and
// evictions find a config by its number without locking, through a list
// published atomically, as arena pages are.
type registry struct {
	mu   sync.Mutex
	ids  map[string]uint32
	keys map[string]uint32              // a Spec's encoding → its config number
	cfgs atomic.Pointer[[]*limitConfig] // by number
}

// limitConfig is a config a store has seen: the first algorithm opened
// with its Spec (algorithms with equal Specs decide alike), and what a
// reader of a state it wrote needs to know.
type limitConfig struct {
	alg    algorithm.Algorithm
	limit  int64
	spec   string // the Spec's name, for errors about an algorithm with no Tag
	tag    algorithm.Tag
	tagged bool
	wide   bool // not algorithm.Narrow: the state has N2 and Log
}

// cfg returns config n, which intern has numbered.
func (r *registry) cfg(n uint32) *limitConfig { return (*r.cfgs.Load())[n] }

// intern returns the handle's view of l, numbering its identity and
// config if they are new to the store.
func (r *registry) intern(l store.Limit) limitRef {
	alg := l.Algorithm
	spec := alg.Spec()
	b := make([]byte, 0, len(spec.Name)+1+8*len(spec.Params))
	b = append(append(b, spec.Name...), 0) // no name is a prefix of another's bytes
	for _, p := range spec.Params {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ids == nil {
		r.ids, r.keys = map[string]uint32{}, map[string]uint32{}
	}
	id, ok := r.ids[l.ID]
	if !ok {
		id = uint32(len(r.ids))
		r.ids[l.ID] = id
	}
	n, ok := r.keys[string(b)]
	if !ok {
		var cfgs []*limitConfig
		if p := r.cfgs.Load(); p != nil {
			cfgs = *p
		}
		n = uint32(len(cfgs))
		c := &limitConfig{alg: alg, limit: alg.Limit(), spec: spec.Name}
		c.tag, c.tagged = algorithm.TagOf(alg)
		_, narrow := alg.(algorithm.Narrow)
		c.wide = !narrow
		// Within its capacity, append writes past the length every reader
		// holds, so readers of the old list never see the write.
		cfgs = append(cfgs, c)
		r.cfgs.Store(&cfgs)
		r.keys[string(b)] = n
	}
	c := r.cfg(n)
	ref := limitRef{
		alg: alg, limit: c.limit, id: id, cfg: n, wide: c.wide,
		name: l.ID, rule: l.Inherit, reset: l.ResetOnMismatch,
	}
	ref.inherit, _ = alg.(algorithm.Inheritor)
	return ref
}

// describe names the meaning of c's states, for errors.
func (c *limitConfig) describe() string {
	if c.tagged {
		return c.tag.String()
	}
	return c.spec
}
