package luascript_test

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/internal/luascript"
)

// evalAs runs script, with KEYS keys and ARGV args, as a store does: its
// plain form, then, while that answers RLCONVERT (a state only the
// conversion form reads; nothing was written), the conversion form that
// reads the kinds it found (luascript.Script.Converting), for limits of
// modes (luascript.Modes). ro runs it read-only (EVAL_RO), as a peek.
func evalAs(ctx context.Context, client redis.Scripter, script *luascript.Script, modes string, ro bool, keys []string, args ...any) *redis.Cmd {
	for {
		var cmd *redis.Cmd
		if ro {
			cmd = client.EvalRO(ctx, script.Source, keys, args...)
		} else {
			cmd = client.Eval(ctx, script.Source, keys, args...)
		}
		letters, ok := luascript.Conversion(cmd.Err())
		if !ok {
			return cmd
		}
		next := script.Converting(letters, modes)
		if next == script {
			return cmd
		}
		script = next
	}
}
