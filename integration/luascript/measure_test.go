package luascript_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// evalshaStats returns the calls and µs of EVALSHA that the server's
// INFO commandstats counts, for the measurements of script cost.
func evalshaStats(ctx context.Context, t *testing.T, c *redis.Client) (calls, usec int64) {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return calls, usec
}

// mustAlg returns alg, failing t on err.
func mustAlg(t *testing.T, alg algorithm.Algorithm, err error) algorithm.Algorithm {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return alg
}
