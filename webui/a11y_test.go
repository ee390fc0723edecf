package webui_test

import (
	"context"
	"crypto/sha256"
	_ "embed" // axe-core
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core, vendored unchanged from its npm package
// (testdata/axe-core/README.md says how to update it). Only the test
// binary embeds it.
//
//go:embed testdata/axe-core/axe.min.js
var axeSource string

// The axe-core vendored, and its file's SHA-256.
const (
	axeVersion = "4.14.1"
	axeSHA256  = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
)

// TestAxeCorePinned: the axe-core the browser tests run is the version
// pinned, byte for byte.
func TestAxeCorePinned(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(axeSource))
	if got := hex.EncodeToString(sum[:]); got != axeSHA256 {
		t.Errorf("testdata/axe-core/axe.min.js has SHA-256 %s, want %s", got, axeSHA256)
	}
	if !strings.HasPrefix(axeSource, "/*! axe v"+axeVersion+"\n") {
		t.Errorf("testdata/axe-core/axe.min.js is not axe %s: it begins %q", axeVersion, axeSource[:min(len(axeSource), 20)])
	}
}

// axeRun runs axe-core on the document against WCAG 2.1 levels A and AA
// (the rules tagged so: not its best practices, nor WCAG 2.2's), and
// gives each violation, with the nodes' selectors.
const axeRun = `axe.run(document, {
	runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
	resultTypes: ["violations"],
}).then(r => r.violations.map(v => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map(n => n.target.join(" ")) })))`

// axeViolation is one rule a page breaks, and where.
type axeViolation struct {
	ID, Impact, Help string
	Targets          []string
}

// a11yChecked holds the pages checked in this run.
var a11yChecked sync.Map

// checkA11y fails the test with each violation of WCAG 2.1 A or AA that
// axe-core finds on the page the browser shows. page names it (a page in
// a state, such as "connection (failed)"): each is checked once a run,
// by the first test to reach it, so that a page every test passes
// through (sign-up) costs one check.
func checkA11y(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if _, done := a11yChecked.LoadOrStore(page, true); done {
		return
	}
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof axe === "object"`))
	must(t, err)
	if !loaded {
		must(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](axeSource)))
	}
	violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe-core on %s: %v", page, err)
	}
	for _, v := range violations {
		targets := v.Targets
		if len(targets) > 5 {
			targets = append(targets[:5:5], fmt.Sprintf("and %d more", len(v.Targets)-5))
		}
		t.Errorf("%s breaks axe-core's %s (%s): %s: %s", page, v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
	}
}
