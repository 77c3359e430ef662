package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseConfig: no input makes the parser panic, and every refusal
// wraps errConfig. Seeds are the fixtures and examples.
func FuzzParseConfig(f *testing.F) {
	for _, pattern := range []string{"testdata/*/*.yaml", "examples/*.yaml"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, yaml string) {
		cfg, err := parseConfig(false, [2]string{"f.yaml", yaml})
		if err != nil {
			if !errors.Is(err, errConfig) {
				t.Fatalf("error %v does not wrap errConfig", err)
			}
			return
		}
		for name, dom := range cfg.domains {
			lookup(name, dom, desc("a", "b", "c", "d").Entries)
		}
	})
}
