package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's Chromium (package chromium).
const chromiumPath = "/usr/bin/chromium"

// screenshotEnv names a directory that, when set, receives a copy of the
// browser test's screenshots, to look at after the test's own temporary
// directory is gone.
const screenshotEnv = "RATELIMIT_DEMO_SCREENSHOTS"

// TestBrowser drives the page in headless Chromium as a person would: it
// sets a bucket of 3 tokens refilled very slowly, sends 5 requests, checks
// the counters and the remaining tokens shown, then switches to a fixed
// window through the form and checks that it took effect.
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (%v); CI must install it: apt-get install -y chromium", chromiumPath, err)
		}
		t.Skipf("skipping the browser test: %s is missing; install it with apt-get install -y chromium", chromiumPath)
	}
	srv := newTestServer(t, serverOptions{})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	shots := t.TempDir()
	// A fresh profile. Not t.TempDir(): Chromium's helper processes may
	// still write to it for a moment after the browser has exited, so its
	// removal is retried. Cleanups run last-registered first, so this one
	// runs after the browser is gone.
	profile, err := os.MkdirTemp("", "ratelimit-demo-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeEventually(t, profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		// Without these Chromium reaches for Google's hosts, which this
		// closed network refuses, many connections at a time.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	// The first Run starts the browser, which lives as long as the context
	// it was given: run it on browser, not on a step's shorter context.
	launched := time.Now()
	if err := chromedp.Run(browser); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	t.Logf("Chromium started in %v", time.Since(launched).Round(time.Millisecond))

	// Errors the page's scripts throw or log fail the test.
	var mu sync.Mutex
	var jsErrors []string
	chromedp.ListenTarget(browser, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type != runtime.APITypeError {
				return
			}
			for _, a := range ev.Args {
				msg += " " + string(a.Value) + a.Description
			}
		default:
			return
		}
		mu.Lock()
		jsErrors = append(jsErrors, msg)
		mu.Unlock()
	})

	shot := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		var png []byte
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		t.Logf("screenshot: %s", path)
		if dir := os.Getenv(screenshotEnv); dir != "" {
			copyPath := filepath.Join(dir, name+".png")
			if err := os.WriteFile(copyPath, png, 0o644); err != nil {
				t.Errorf("screenshot copy: %v", err)
				return
			}
			t.Logf("screenshot copy: %s", copyPath)
		}
	}
	// step runs actions with a time limit of their own, so that the
	// browser outlives a failed step long enough for a screenshot.
	step := func(what string, actions ...chromedp.Action) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 20*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, actions...); err != nil {
			shot("failure")
			t.Fatalf("%s: %v", what, err)
		}
	}
	// waitFor polls a JavaScript condition until it holds.
	waitFor := func(what, cond string) {
		t.Helper()
		var ok bool
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, chromedp.Poll(cond, &ok, chromedp.WithPollingTimeout(8*time.Second))); err != nil {
			shot("failure")
			t.Fatalf("waiting until %s (%s): %v\npage: %s", what, cond, err, describePage(browser))
		}
	}
	text := func(sel string) string {
		t.Helper()
		var s string
		step("read "+sel, chromedp.TextContent(sel, &s, chromedp.ByQuery))
		return strings.TrimSpace(s)
	}
	// typeInto replaces an input's text by typing, as a person would.
	// (chromedp.SetValue(sel, "") would set the text "undefined": an empty
	// string argument reaches the page as undefined.)
	typeInto := func(sel, s string) chromedp.Action {
		return chromedp.Tasks{
			chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).value = ""`, sel), nil),
			chromedp.SendKeys(sel, s, chromedp.ByQuery),
		}
	}
	// choose selects an option; SetValue fires the input and change
	// events a person's choice would.
	choose := func(sel, value string) chromedp.Action {
		return chromedp.SetValue(sel, value, chromedp.ByQuery)
	}

	start := time.Now()
	step("load the page",
		chromedp.Navigate(ts.URL),
		chromedp.WaitVisible("#send", chromedp.ByQuery),
	)
	waitFor("the configuration is loaded", `document.body.dataset.ready === "true"`)
	if got, want := text("#active-config"), "tokenbucket(capacity=10, rate=1/s) and slidinglog(limit=20, window=1m0s)"; got != want {
		t.Errorf("active config at start = %q, want %q", got, want)
	}

	// A bucket of 3 tokens that takes 3000 s to refill.
	step("configure a small token bucket",
		choose("#algorithm", algTokenBucket),
		typeInto("#capacity", "3"),
		typeInto("#rate", "0.001"),
		chromedp.Click("#apply", chromedp.ByQuery),
	)
	waitFor("the bucket is in service", `document.getElementById("active-config").textContent === "tokenbucket(capacity=3, rate=0.001/s) and slidinglog(limit=20, window=1m0s)"`)

	step("send 5 requests",
		chromedp.Click("#send", chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery),
	)
	waitFor("5 decisions are logged", `document.querySelectorAll("#log li[data-kind=allowed], #log li[data-kind=denied]").length === 5`)
	if got, want := text("#allowed-count"), "3"; got != want {
		t.Errorf("allowed count = %s, want %s", got, want)
	}
	if got, want := text("#denied-count"), "2"; got != want {
		t.Errorf("denied count = %s, want %s", got, want)
	}
	// The display settles on the latest state (responses and polls race).
	waitFor("0 tokens are shown", `document.getElementById("remaining").textContent === "0"`)
	if got, want := text("#remaining"), "0"; got != want {
		t.Errorf("remaining = %s, want %s", got, want)
	}
	if got := text("#last-headers"); !strings.Contains(got, "RateLimit: ") || !strings.Contains(got, "Retry-After: ") {
		t.Errorf("last response shown without RateLimit and Retry-After headers:\n%s", got)
	}
	shot("token-bucket")

	// Switch to a fixed window through the form.
	step("choose a fixed window",
		choose("#algorithm", algFixedWindow),
		chromedp.WaitVisible("#limit", chromedp.ByQuery),
		typeInto("#limit", "4"),
		typeInto("#window", "24h"), // a window edge is not crossed during the test
		chromedp.Click("#apply", chromedp.ByQuery),
	)
	waitFor("the fixed window is in service", `document.getElementById("active-config").textContent === "fixedwindow(limit=4, window=24h0m0s) and slidinglog(limit=20, window=1m0s)"`)
	cfg := getConfig(t, ts.URL)
	if cfg.Algorithm != algFixedWindow || cfg.Limit != 4 || time.Duration(cfg.Window) != 24*time.Hour {
		t.Errorf("server config after the form = %+v, want fixedwindow, limit 4, window 24h", cfg.demoConfig)
	}
	step("send one more", chromedp.Click("#send", chromedp.ByQuery))
	waitFor("the request is admitted by the new window", `document.getElementById("allowed-count").textContent === "4"`)
	if got, want := text("#log li:first-child .msg"), "cost 1 · remaining 3 / 4"; !strings.HasPrefix(got, want) {
		t.Errorf("newest log entry = %q, want it to start with %q", got, want)
	}
	waitFor("3 are left in the window", `document.getElementById("remaining").textContent === "3"`)
	if got, want := text("#limit-display"), "4"; got != want {
		t.Errorf("limit shown = %s, want %s", got, want)
	}
	if got, want := text("#remaining-label"), "Left in window"; got != want {
		t.Errorf("remaining label = %q, want %q", got, want)
	}

	shot("fixed-window")

	// GCRA, through its own fields.
	step("choose GCRA",
		choose("#algorithm", algGCRA),
		chromedp.WaitVisible("#burst", chromedp.ByQuery),
		typeInto("#burst", "2"),
		typeInto("#every", "1h"),
		chromedp.Click("#apply", chromedp.ByQuery),
	)
	waitFor("GCRA is in service", `document.getElementById("active-config").textContent === "gcra(burst=2, every=1h0m0s) and slidinglog(limit=20, window=1m0s)"`)
	if cfg := getConfig(t, ts.URL); cfg.Algorithm != algGCRA || cfg.Burst != 2 || time.Duration(cfg.Every) != time.Hour {
		t.Errorf("server config after the form = %+v, want gcra, burst 2, every 1h", cfg.demoConfig)
	}
	step("send one more", chromedp.Click("#send", chromedp.ByQuery))
	waitFor("the request is admitted by GCRA", `document.getElementById("allowed-count").textContent === "5"`)
	waitFor("1 is left of the burst", `document.getElementById("remaining").textContent === "1"`)
	if got, want := text("#remaining-label"), "Tokens left"; got != want {
		t.Errorf("remaining label = %q, want %q", got, want)
	}
	shot("gcra")
	// Add a sustained limit of 5 a day: with the window's 4 it is the
	// window that binds first. Then raise the window to 9: the sustained
	// limit binds, and the page names it. Each configuration starts afresh.
	step("a fixed window and a sustained limit",
		choose("#algorithm", algFixedWindow),
		chromedp.WaitVisible("#limit", chromedp.ByQuery),
		typeInto("#limit", "4"),
		typeInto("#window", "24h"),
		typeInto("#sustained-limit", "5"),
		typeInto("#sustained-window", "24h"),
		chromedp.Click("#apply", chromedp.ByQuery),
	)
	waitFor("the policy is in service", `document.getElementById("active-config").textContent === "fixedwindow(limit=4, window=24h0m0s) and slidinglog(limit=5, window=24h0m0s)"`)
	step("send 2 requests", chromedp.Click("#send", chromedp.ByQuery), chromedp.Click("#send", chromedp.ByQuery))
	waitFor("2 more are admitted", `document.getElementById("allowed-count").textContent === "7"`)
	waitFor("the window binds", `document.getElementById("binding").textContent === "burst"`)
	step("set the window's limit above the sustained one",
		typeInto("#limit", "9"),
		chromedp.Click("#apply", chromedp.ByQuery),
	)
	waitFor("the new policy is in service", `document.getElementById("active-config").textContent === "fixedwindow(limit=9, window=24h0m0s) and slidinglog(limit=5, window=24h0m0s)"`)
	step("send 6 requests", chromedp.Click("#send", chromedp.ByQuery), chromedp.Click("#send", chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery), chromedp.Click("#send", chromedp.ByQuery),
		chromedp.Click("#send", chromedp.ByQuery), chromedp.Click("#send", chromedp.ByQuery))
	waitFor("the sixth is denied", `document.querySelectorAll("#log li[data-kind=denied]").length === 3`)
	waitFor("the sustained limit binds", `document.getElementById("binding").textContent === "sustained"`)
	if got := text("#log li[data-kind=denied] .msg"); !strings.Contains(got, "denied by sustained") {
		t.Errorf("newest denial logged as %q, want it to name the sustained limit", got)
	}
	shot("policy")

	// The "Burst of" button sends as many requests as its field says
	// (found by its place beside that field, not by its id).
	const decided = `document.querySelectorAll("#log li[data-kind=allowed], #log li[data-kind=denied]").length`
	var before int
	step("count the decisions", chromedp.Evaluate(decided, &before))
	step("send a burst of 3", typeInto("#burst-n", "3"), chromedp.Click("#send-card .group button", chromedp.ByQuery))
	waitFor("the burst's 3 decisions are logged", fmt.Sprintf("%s === %d", decided, before+3))

	// The comparison: choose the window-boundary burst, then check every
	// row drawn has a tick where the JSON has a request, admitted or
	// denied, and the JSON's counts per window.
	waitFor("the comparison is drawn", `document.body.dataset.compare === "steady"`)
	step("choose the window-boundary burst", choose("#pattern", "boundary"))
	waitFor("the boundary burst is drawn", `document.body.dataset.compare === "boundary"`)
	var drawn []drawnRow
	step("read the comparison", chromedp.Evaluate(`[...document.querySelectorAll("#compare g.row")].map((g) => ({
		name: g.dataset.alg,
		admittedX: [...g.querySelectorAll("line.admitted")].map((l) => Number(l.getAttribute("x1"))),
		deniedX: [...g.querySelectorAll("line.denied")].map((l) => Number(l.getAttribute("x1"))),
		counts: g.querySelector(".counts").textContent,
	}))`, &drawn))
	checkDrawnComparison(t, getComparison(t, ts.URL, "boundary"), drawn)
	if got := text("#pattern-description"); !strings.Contains(got, "last second of the first window") {
		t.Errorf("pattern description = %q, want the boundary burst's", got)
	}
	step("scroll to the comparison", chromedp.ScrollIntoView("#compare-card", chromedp.ByQuery))
	shot("compare")
	t.Logf("browser steps took %v", time.Since(start).Round(time.Millisecond))

	mu.Lock()
	defer mu.Unlock()
	for _, e := range jsErrors {
		t.Errorf("page script error: %s", e)
	}
}

// removeEventually removes dir, retrying for a few seconds while something
// still writes to it.
func removeEventually(t *testing.T, dir string) {
	var err error
	for range 50 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("leaving %s behind: %v", dir, err)
}

// describePage returns the page's counters and log, for failure messages.
func describePage(browser context.Context) string {
	ctx, cancel := context.WithTimeout(browser, 5*time.Second)
	defer cancel()
	var s string
	err := chromedp.Run(ctx, chromedp.Evaluate(`JSON.stringify({
		config: document.getElementById("active-config").textContent,
		allowed: document.getElementById("allowed-count").textContent,
		denied: document.getElementById("denied-count").textContent,
		errors: document.getElementById("error-count").textContent,
		remaining: document.getElementById("remaining").textContent,
		configError: document.getElementById("config-error").textContent,
		log: [...document.querySelectorAll("#log li")].map(li => li.textContent),
	})`, &s))
	if err != nil {
		return err.Error()
	}
	return s
}

// getConfig returns GET /api/config.
func getConfig(t *testing.T, base string) configJSON {
	t.Helper()
	res, err := http.Get(base + "/api/config")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var cfg configJSON
	if err := json.NewDecoder(res.Body).Decode(&cfg); err != nil {
		t.Fatalf("GET /api/config: %v", err)
	}
	return cfg
}

// drawnRow is one row of the comparison as the page drew it.
type drawnRow struct {
	Name      string    `json:"name"`
	AdmittedX []float64 `json:"admittedX"`
	DeniedX   []float64 `json:"deniedX"`
	Counts    string    `json:"counts"`
}

// getComparison returns GET /api/compare?pattern=name.
func getComparison(t *testing.T, base, name string) compareJSON {
	t.Helper()
	res, err := http.Get(base + "/api/compare?pattern=" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var c compareJSON
	if err := json.NewDecoder(res.Body).Decode(&c); err != nil {
		t.Fatalf("GET /api/compare: %v", err)
	}
	return c
}

// checkDrawnComparison checks the page drew c: a row per algorithm in
// order, an admitted tick at each admitted instant, a denied tick at each
// denied one, and the counts per window.
func checkDrawnComparison(t *testing.T, c compareJSON, drawn []drawnRow) {
	t.Helper()
	if len(drawn) != len(c.Rows) {
		t.Fatalf("the page drew %d rows, the JSON has %d", len(drawn), len(c.Rows))
	}
	// The page's x of an instant: after the 200-unit label column, 600
	// units for the span.
	x := func(ms float64) float64 { return 200 + 600*ms/c.SpanMs }
	near := func(got []float64, ms []float64) bool {
		if len(got) != len(ms) {
			return false
		}
		for i := range got {
			if d := got[i] - x(ms[i]); d < -0.01 || d > 0.01 {
				return false
			}
		}
		return true
	}
	for i, r := range c.Rows {
		d := drawn[i]
		if d.Name != r.Name {
			t.Errorf("row %d is %s, want %s", i, d.Name, r.Name)
			continue
		}
		if !near(d.AdmittedX, r.AdmittedMs) {
			t.Errorf("%s: %d admitted ticks at x %v, want %d at the instants %v ms", r.Name, len(d.AdmittedX), d.AdmittedX, len(r.AdmittedMs), r.AdmittedMs)
		}
		if !near(d.DeniedX, r.DeniedMs) {
			t.Errorf("%s: %d denied ticks at x %v, want %d at the instants %v ms", r.Name, len(d.DeniedX), d.DeniedX, len(r.DeniedMs), r.DeniedMs)
		}
		counts := make([]string, len(r.PerWindow))
		for j, n := range r.PerWindow {
			counts[j] = fmt.Sprint(n)
		}
		if want := strings.Join(counts, " · ") + fmt.Sprintf(" (%d)", r.MaxInWindow); d.Counts != want {
			t.Errorf("%s: counts shown %q, want %q", r.Name, d.Counts, want)
		}
	}
}
