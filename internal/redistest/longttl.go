package redistest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/go-ratelimit/ratelimit/internal/luascript"
)

// ttlFormula is how every script computes the TTL it writes.
const ttlFormula = "return math.ceil(us / 1000)"

// longTTLScripts is a copy of every script that writes keys with the given
// TTL instead of their ResetAfter, and otherwise decides exactly as the
// script does.
type longTTLScripts struct {
	bySHA, bySource map[string]*luascript.Script
}

var (
	longTTLMu    sync.Mutex
	longTTLCache = map[time.Duration]*longTTLScripts{}
)

func longTTL(ttl time.Duration) *longTTLScripts {
	longTTLMu.Lock()
	defer longTTLMu.Unlock()
	if l := longTTLCache[ttl]; l != nil {
		return l
	}
	l := &longTTLScripts{bySHA: map[string]*luascript.Script{}, bySource: map[string]*luascript.Script{}}
	for _, s := range luascript.Scripts() {
		if strings.Count(s.Source, ttlFormula) != 1 {
			panic(fmt.Sprintf("redistest: the %s script no longer computes its TTL with %q", s.Name, ttlFormula))
		}
		src := strings.Replace(s.Source, ttlFormula, fmt.Sprintf("return %d", ttl.Milliseconds()), 1)
		sum := sha1.Sum([]byte(src))
		v := &luascript.Script{Name: s.Name, Source: src, SHA1: hex.EncodeToString(sum[:])}
		l.bySHA[s.SHA1], l.bySource[s.Source] = v, v
	}
	longTTLCache[ttl] = l
	return l
}

// swap returns the long-TTL stand-in for the script argument of an EVAL or
// EVALSHA (the source or the SHA1), or "" when it is not a library script.
func (l *longTTLScripts) swap(command, arg string) string {
	var v *luascript.Script
	switch strings.ToLower(command) {
	case "evalsha":
		if v = l.bySHA[arg]; v != nil {
			return v.SHA1
		}
	case "eval":
		if v = l.bySource[arg]; v != nil {
			return v.Source
		}
	}
	return ""
}

// longTTLGoRedis is a go-redis client that runs the library's scripts
// that may write (EVAL, EVALSHA) in their long-TTL form.
type longTTLGoRedis struct {
	redis.UniversalClient
	scripts *longTTLScripts
}

func (c longTTLGoRedis) Process(ctx context.Context, cmd redis.Cmder) error {
	if args := cmd.Args(); len(args) > 1 {
		if arg, ok := args[1].(string); ok {
			if v := c.scripts.swap(cmd.Name(), arg); v != "" {
				args[1] = v // the command is written from its arguments
			}
		}
	}
	return c.UniversalClient.Process(ctx, cmd)
}

// longTTLRueidis is a rueidis client that runs the library's scripts that
// may write (EVAL, EVALSHA) in their long-TTL form.
type longTTLRueidis struct {
	rueidis.Client
	scripts *longTTLScripts
}

func (c longTTLRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	s := cmd.Commands()
	if len(s) < 4 {
		return c.Client.Do(ctx, cmd)
	}
	v := c.scripts.swap(s[0], s[1])
	if v == "" {
		return c.Client.Do(ctx, cmd)
	}
	swapped := c.B().Arbitrary(s[0], v, s[2]).Keys(s[3]).Args(s[4:]...).Build()
	return c.Client.Do(ctx, swapped)
}
