package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is Debian's headless browser. Under CI=true a missing one fails
// the test, so the dashboard is never left untested by accident.
func chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("FALCON_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium; .ci/run does): the dashboard cannot be tested")
	}
	t.Skip("chromium is not installed; apt-get install chromium (CI=true fails here instead)")
	return ""
}

// tab is a headless Chromium tab, with every message its pages wrote to
// the console.
type tab struct {
	t     testing.TB
	ctx   context.Context
	log   *consoleLog
	shots string
}

type consoleLog struct {
	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
}

// with returns the tab reporting failures to t (a subtest).
func (b *tab) with(t testing.TB) *tab {
	c := *b
	c.t = t
	return &c
}

// newTab starts Chromium with a fresh profile and opens a tab. The flags
// keep it from reaching anything but the pages under test: no QUIC, no
// background networking, component updates or sync.
func newTab(t testing.TB) *tab {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline
		t.Fatalf("starting chromium: %v", err)
	}
	tb := &tab{t: t, ctx: ctx, log: &consoleLog{}, shots: screenshotDir(t)}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			tb.log.mu.Lock()
			tb.log.messages = append(tb.log.messages, m)
			tb.log.mu.Unlock()
		}
	}()
	return tb
}

// screenshotDir is $FALCON_SCREENSHOT_DIR, or a new directory that outlives
// the test so the pictures can be looked at.
func screenshotDir(t testing.TB) string {
	if d := os.Getenv("FALCON_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "falcon-ui-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// do runs actions with a deadline of 30 s.
func (b *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v\nconsole:\n%s", err, b.console())
	}
}

// open navigates and waits until sel is visible.
func (b *tab) open(url, sel string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// until waits for a JavaScript condition on the page.
func (b *tab) until(what, js string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		b.t.Fatalf("%s: %v (waited for %s)\npage:\n%s\nconsole:\n%s", what, err, js, html, b.console())
	}
}

func eval[T any](b *tab, js string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// shot saves a screenshot of the whole page.
func (b *tab) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
}

// console is every message so far, one a line.
func (b *tab) console() string {
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	var s strings.Builder
	for _, m := range b.log.messages {
		fmt.Fprintf(&s, "%s:%d %s\n", m.URL, m.Line+1, m)
	}
	return s.String()
}

// problems are the errors and warnings pages wrote, and uncaught
// exceptions, but for those allow accepts.
func (b *tab) problems(allow func(chromedp.ConsoleMessage) bool) []string {
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	var out []string
	for _, m := range b.log.messages {
		bad := m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning
		if bad && (allow == nil || !allow(m)) {
			out = append(out, fmt.Sprintf("%s:%d %s", m.URL, m.Line+1, m))
		}
	}
	return out
}

const uiTrain = `
name: ui-train-%[1]s
exp_type: training
tags: [ui, lr-sweep]
config: |
  optimizer:
    lr: %[2]s
  batch: 64
role_to_task_spec:
  worker:
    command: |
      for i in $(seq 1 60); do
        printf '{"step": %%d, "step_time": 0.%%d, "loss": %%d.5}\n' $i $((%[3]d + i %% 7)) $((100 / i)) >> "$FALCON_ARTIFACT_DIR/metrics.jsonl"
      done
      mkdir -p "$FALCON_ARTIFACT_DIR/out"
      echo "result of %[1]s" > "$FALCON_ARTIFACT_DIR/out/result.txt"
      echo "hello from rank $FALCON_RANK"
    replica: 1
`

const uiSleeper = `
name: ui-sleeper-%s
exp_type: benchmark
role_to_task_spec:
  main:
    command: sleep 600
    replica: 1
`

// TestDashboardInBrowser drives every page of /ui in headless Chromium
// against falcon dev: each shows the real data, a status changes on the
// open list and experiment page without a reload, nothing lands in the
// console, and a screenshot of each page is kept.
func TestDashboardInBrowser(t *testing.T) {
	tb := newTab(t)
	d := startDev(t, "")
	base := "http://" + d.http

	a := d.create(fmt.Sprintf(uiTrain, "a", "0.1", 40))["id"].(string)
	bb := d.create(fmt.Sprintf(uiTrain, "b", "0.2", 50))["id"].(string)
	s1 := d.create(fmt.Sprintf(uiSleeper, "1"))["id"].(string)
	s2 := d.create(fmt.Sprintf(uiSleeper, "2"))["id"].(string)
	for _, id := range []string{a, bb} {
		if r := d.run("", "exp", "wait", id, "--timeout", "2m"); r.code != 0 {
			t.Fatalf("exp wait %s: exit %d: %s", id, r.code, r.stderr)
		}
	}
	running := func(exp map[string]any) bool { return exp["status"] == "Running" }
	d.waitFor(s1, "Running", running)
	sleeperJob := jobsOf(d.waitFor(s2, "Running", running))[0]["id"].(string)

	t.Run("list, live", func(t *testing.T) {
		b, d := tb.with(t), d.with(t)
		row := fmt.Sprintf(`tr[data-exp-id="%s"]`, s1)
		b.open(base+"/ui/", row)
		for _, id := range []string{a, bb, s1, s2} {
			if !eval[bool](b, fmt.Sprintf(`!!document.querySelector('tr[data-exp-id="%s"]')`, id)) {
				t.Errorf("the list lacks %s", id)
			}
		}
		b.until("the stream is open", `document.getElementById("live-state").textContent === "live"`)
		b.do(chromedp.Evaluate[chromedp.Void](`window.falconNoReload = true`))
		if r := d.run("", "exp", "abort", s1, "--reason", "seen from the browser", "--yes"); r.code != 0 {
			t.Fatalf("exp abort: exit %d: %s", r.code, r.stderr)
		}
		b.until("the row shows Aborted", fmt.Sprintf(`(() => { const r = document.querySelector('%s');
			return r.dataset.status === "Aborted" && r.querySelector("[data-role=status]").textContent === "Aborted"
				&& r.querySelector("[data-role=message]").textContent.includes("seen from the browser"); })()`, row))
		if !eval[bool](b, `window.falconNoReload === true`) {
			t.Error("the page was reloaded to show the change")
		}
		b.shot("experiments")
		// Filters narrow the list to what the server and the page match.
		b.open(base+"/ui/?tag=lr-sweep&name=ui-train-b", "#experiments")
		if n := eval[int](b, `document.querySelectorAll("tr[data-exp-id]").length`); n != 1 {
			t.Errorf("tag and name filters show %d rows, want 1", n)
		}
	})

	t.Run("experiment", func(t *testing.T) {
		b := tb.with(t)
		b.open(base+"/ui/experiments/"+a, "#jobs-table tr[data-job-id]")
		checks := map[string]string{
			"the status":         `document.querySelector("#headline [data-role=status]").textContent === "Succeeded"`,
			"the history":        `document.querySelectorAll("#events-table tbody tr").length >= 3`,
			"the log tail":       `document.getElementById("log-tail").textContent.includes("hello from rank 0")`,
			"the artifact files": `[...document.querySelectorAll("#files-table a[download]")].some(a => a.textContent === "out/result.txt")`,
			"two charts":         `document.querySelectorAll("svg.chart path.line").length === 2`,
		}
		for what, js := range checks {
			b.until(what, js)
		}
		got := eval[string](b, `fetch([...document.querySelectorAll("#files-table a[download]")].find(a => a.textContent === "out/result.txt").href).then(r => r.text())`, chromedp.EvalAwaitPromise)
		if got != "result of a\n" {
			t.Errorf("the download link gave %q", got)
		}
		// The readout follows the pointer.
		b.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("svg.chart"), r = s.getBoundingClientRect();
			s.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + r.width / 2, clientY: r.top + r.height / 2})); })()`))
		b.until("the readout", `document.querySelector(".readout").textContent.startsWith("step ")`)
		b.shot("experiment")
	})

	t.Run("clusters", func(t *testing.T) {
		b := tb.with(t)
		b.open(base+"/ui/clusters", "#cluster-local")
		b.until("the running job", fmt.Sprintf(`!!document.querySelector('#cluster-local table.running tr[data-job-id="%s"]')`, sleeperJob))
		b.shot("clusters")
	})

	t.Run("experiment, live", func(t *testing.T) {
		b, d := tb.with(t), d.with(t)
		b.open(base+"/ui/experiments/"+s2, "#headline")
		b.until("the stream is open", `document.getElementById("live-state").textContent === "live"`)
		b.do(chromedp.Evaluate[chromedp.Void](`window.falconNoReload = true`))
		if r := d.run("", "exp", "abort", s2, "--yes"); r.code != 0 {
			t.Fatalf("exp abort: exit %d: %s", r.code, r.stderr)
		}
		b.until("the abort shows", fmt.Sprintf(`document.querySelector("#headline [data-role=status]").textContent === "Aborted"
			&& document.querySelector('#jobs-table tr[data-job-id="%s"]').dataset.status === "Aborted"
			&& [...document.querySelectorAll("#events-table tbody tr")].some(r => r.textContent.includes("Aborting"))
			&& document.getElementById("live-state").textContent.startsWith("ended")`, sleeperJob))
		if !eval[bool](b, `window.falconNoReload === true`) {
			t.Error("the page was reloaded to show the change")
		}
		b.shot("experiment-live")
	})

	t.Run("compare", func(t *testing.T) {
		b := tb.with(t)
		b.open(base+"/ui/compare?id="+a+"&id="+bb, "#diff-table")
		b.until("the config diff", `[...document.querySelectorAll("#diff-table td")].some(td => td.textContent === "config.optimizer.lr")`)
		b.until("both on one chart", `[...document.querySelectorAll("svg.chart")].some(s => s.querySelector("path.s0") && s.querySelector("path.s1"))`)
		b.until("a verdict", `document.getElementById("verdicts").textContent.includes("regression")`)
		b.shot("compare")
	})

	if p := tb.problems(nil); len(p) > 0 {
		t.Errorf("the console has errors:\n%s", strings.Join(p, "\n"))
	}

	t.Run("unknown experiment", func(t *testing.T) {
		b := tb.with(t)
		b.open(base+"/ui/experiments/exp-0000000000", "section.error")
		b.until("a 404 page", `document.querySelector("h1").textContent.startsWith("404")`)
		b.shot("not-found")
	})
	// The 404 itself is the one error the browser reports, and seeing it
	// shows that the console is read at all.
	the404 := func(m chromedp.ConsoleMessage) bool { return strings.Contains(m.URL, "exp-0000000000") }
	for deadline := time.Now().Add(10 * time.Second); len(tb.problems(nil)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the console never showed the 404: it is not being read\n%s", tb.console())
		}
	}
	if p := tb.problems(the404); len(p) > 0 {
		t.Errorf("the console has errors:\n%s", strings.Join(p, "\n"))
	}
}
