package redistest

import (
	"context"
	"errors"
	"math/big"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

// counterState matches the value of a fixed window's field whose count
// is kept in a counter (docs/design/counter-window.md): its header (maybe
// with a booking's generation, ";<nonce>" before the colon), its window's
// index, and "*".
var counterState = regexp.MustCompile(`^([A-Z](\d+)[^:;]*)(;[^:]*)?:(-?\d+) \*$`)

// CounterField returns the field of the key's hash where the state of ID
// id, whose field holds v, keeps its count, and whether it keeps one: the
// ID, a brace, the header without a generation, the window's index.
func CounterField(id, v string) (string, bool) {
	m := counterState.FindStringSubmatch(v)
	if m == nil {
		return "", false
	}
	return id + "{" + m[1] + ":" + m[4], true
}

// Folded returns the state the field id of hash holds, v, as one text,
// as the scripts read it: a count kept in a counter read back into the
// value ("<header><index> <count>"; a count past the header's limit is
// the limit, as rlfold reads it), anything else as it is. It writes
// nothing.
func Folded(ctx context.Context, c redis.Cmdable, hash, id, v string) (string, error) {
	cf, ok := CounterField(id, v)
	if !ok {
		return v, nil
	}
	n, err := c.HGet(ctx, hash, cf).Result()
	switch {
	case errors.Is(err, redis.Nil):
		n = "0"
	case err != nil:
		return "", err
	}
	limit := counterState.FindStringSubmatch(v)[2]
	if c, ok := new(big.Int).SetString(n, 10); ok && c.Sign() >= 0 && !strings.HasPrefix(n, "+") {
		if l, _ := new(big.Int).SetString(limit, 10); c.Cmp(l) > 0 {
			n = limit // a full window's count, past the limit by the refusals it kept
		}
	}
	return strings.TrimSuffix(v, "*") + n, nil
}

// FoldedHash returns HGETALL of hash as the states of its IDs: every
// ID's value Folded, and no counter (a field with a brace, which no ID
// has).
func FoldedHash(ctx context.Context, c redis.Cmdable, hash string) (map[string]string, error) {
	h, err := c.HGetAll(ctx, hash).Result()
	if err != nil {
		return nil, err
	}
	for id, v := range h {
		if strings.Contains(id, "{") {
			delete(h, id)
			continue
		}
		if h[id], err = Folded(ctx, c, hash, id, v); err != nil {
			return nil, err
		}
	}
	return h, nil
}
