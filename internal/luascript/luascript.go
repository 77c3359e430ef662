// Package luascript holds the Lua scripts that run each algorithm's
// transition inside Redis, shared by the go-redis and rueidis stores.
//
// A script is the prelude (prelude.lua: KEYS, ARGV and reply layout, the
// clock) followed by one algorithm's body. Each body mirrors the Go
// transition of the same algorithm, operation for operation.
package luascript

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/store"
)

var (
	//go:embed prelude.lua
	prelude string
	//go:embed tokenbucket.lua
	tokenBucket string
	//go:embed tokenbucket-interval.lua
	intervalBucket string
	//go:embed slidinglog.lua
	slidingLog string
	//go:embed fixedwindow.lua
	fixedWindow string
	//go:embed gcra.lua
	gcra string
	//go:embed slidingwindow.lua
	slidingWindow string
)

// Script is one algorithm's script.
type Script struct {
	// Name is the algorithm.Spec name the script implements.
	Name string
	// Source is the whole script text.
	Source string
	// SHA1 is the hex SHA-1 of Source, for EVALSHA.
	SHA1 string
}

var scripts = map[string]*Script{}

func init() {
	for name, body := range map[string]string{
		"tokenbucket":          tokenBucket,
		"tokenbucket-interval": intervalBucket,
		"slidinglog":           slidingLog,
		"fixedwindow":          fixedWindow,
		"gcra":                 gcra,
		"slidingwindow":        slidingWindow,
	} {
		src := prelude + body
		sum := sha1.Sum([]byte(src))
		scripts[name] = &Script{Name: name, Source: src, SHA1: hex.EncodeToString(sum[:])}
	}
}

// Scripts returns every script, for tests and for preloading.
func Scripts() []*Script {
	out := make([]*Script, 0, len(scripts))
	for _, s := range scripts {
		out = append(out, s)
	}
	return out
}

// For returns the script implementing spec and spec's parameters encoded
// as script arguments (ARGV[3] onward), or an error wrapping
// store.ErrAlgorithmUnsupported.
func For(spec algorithm.Spec) (*Script, []string, error) {
	s, ok := scripts[spec.Name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no Lua script for %q", store.ErrAlgorithmUnsupported, spec.Name)
	}
	params := make([]string, len(spec.Params))
	for i, p := range spec.Params {
		// The shortest text that parses back to the same double, without
		// an exponent (gopher-lua, inside miniredis, cannot parse one).
		params[i] = strconv.FormatFloat(p, 'f', -1, 64)
	}
	return s, params, nil
}
