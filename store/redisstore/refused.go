package redisstore

import "github.com/go-ratelimit/ratelimit/store"

var _ store.Refuser = (*Table[string])(nil)

// Refused returns what the table's Runner says of a server that refuses
// connections, when the Runner is a store.Refuser (the go-redis store's
// is), else nil.
func (t *Table[K]) Refused() error {
	if r, ok := t.run.(store.Refuser); ok {
		return r.Refused()
	}
	return nil
}
