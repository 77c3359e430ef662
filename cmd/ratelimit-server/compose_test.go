package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// readYAML decodes the YAML file at path.
func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestComposeExample: the compose example of the documentation holds
// together. Its Envoy configuration is a valid Bootstrap (every field and
// typed_config known to go-control-plane, its constraints met); the
// server's arguments parse; its configuration directory loads and has a
// rule for each descriptor the Envoy routes send; and the image's default
// arguments parse too.
func TestComposeExample(t *testing.T) {
	dir := filepath.Join("examples", "compose")
	j, err := json.Marshal(readYAML(t, filepath.Join(dir, "envoy.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("envoy.yaml is not a Bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}

	compose := readYAML(t, filepath.Join(dir, "compose.yaml"))
	rl := compose["services"].(map[string]any)["ratelimit"].(map[string]any)
	var args []string
	for _, a := range rl["command"].([]any) {
		args = append(args, a.(string))
	}
	o, err := parseFlags(args, io.Discard)
	if err != nil || o.storeKind != "redis" || o.configPath != "/etc/ratelimit" {
		t.Fatalf("the ratelimit service's command %q: %+v, %v", args, o, err)
	}
	cfg, err := loadConfig(filepath.Join(dir, "ratelimit"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range [][]string{{"remote_address", "192.0.2.7"}, {"path", "/login"}} {
		if m := lookup("edge", cfg.domains["edge"], desc(d...).Entries); m.rule == nil {
			t.Errorf("no rule for %v, which envoy.yaml sends", d)
		}
	}

	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(cf), "\n") {
		if cmd, ok := strings.CutPrefix(line, "CMD "); ok {
			if err := json.Unmarshal([]byte(cmd), &args); err != nil {
				t.Fatalf("Containerfile: %s: %v", line, err)
			}
			if _, err := parseFlags(args, io.Discard); err != nil {
				t.Errorf("the image's default arguments %q: %v", args, err)
			}
		}
	}
}
