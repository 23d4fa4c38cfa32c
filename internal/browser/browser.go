// Package browser lets tests drive Debian's headless Chromium through the
// DevTools protocol (github.com/chromedp/chromedp) and collects what a
// person at the page would see go wrong: console errors and warnings,
// uncaught exceptions and the browser's own error log (failed loads,
// refused Content-Security-Policy). A test on a machine without Chromium
// is skipped rather than failed.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Width and Height are the size of the browser's window: a laptop screen.
const (
	Width  = 1366
	Height = 900
)

// Timeouts bound every wait, so that a hung browser fails a test instead
// of hanging it.
const (
	// StartTimeout bounds starting Chromium and opening its tab.
	StartTimeout = 60 * time.Second
	// RunTimeout bounds one call of Run, Eval or Screenshot.
	RunTimeout = 30 * time.Second
	// stopTimeout bounds closing Chromium at the end of the test.
	stopTimeout = 10 * time.Second
	// pollInterval is how often WaitFor evaluates its condition.
	pollInterval = 50 * time.Millisecond
)

// Browser is one headless Chromium with one tab, owned by one test.
type Browser struct {
	t   testing.TB
	ctx context.Context // the tab's; its first use started the browser

	mu     sync.Mutex
	errors []string
}

// Path returns the Chromium binary tests use: /usr/bin/chromium, else
// chromium or chromium-browser on PATH; "" when there is none.
func Path() string {
	if fi, err := os.Stat("/usr/bin/chromium"); err == nil && !fi.IsDir() {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless Chromium for t with a window of Width x Height and
// a fresh profile under t.TempDir(), and stops it when t ends. Without
// Chromium, t is skipped. extra are more of Chromium's options, such as
// chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1") for
// a test that needs a host name of its own.
func New(t testing.TB, extra ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	path := Path()
	if path == "" {
		t.Skip("chromium is not installed; .ci/run installs it (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(Width, Height),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // tests run as root in containers
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		// A container's /dev/shm is often too small for Chromium.
		chromedp.Flag("disable-dev-shm-usage", true),
		// Pages under test poll with timers; keep them on time.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &Browser{t: t}
	// WithListener, unlike a listener added later, sees the events of the
	// tab's start too.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	b.ctx = ctx

	// The first call starts the browser, and the browser lives as long as
	// that call's context: a timeout on it would stop the browser when it
	// fires. So the start is bounded from outside instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			cancel()
			cancelAlloc()
			t.Fatalf("starting %s: %v", path, err)
		}
	case <-time.After(StartTimeout):
		cancel()
		cancelAlloc()
		<-started
		t.Fatalf("starting %s: no tab within %v", path, StartTimeout)
	}

	t.Cleanup(func() {
		// Close the browser politely first so that it flushes nothing into
		// a removed profile directory; then make sure the process is gone.
		cctx, ccancel := context.WithTimeout(ctx, stopTimeout)
		if err := chromedp.Cancel(cctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing chromium: %v", err)
		}
		ccancel()
		cancel()
		cancelAlloc() // waits for the process to exit
	})
	return b
}

// listen records what the page reports going wrong. It runs on the tab's
// reading goroutine, before the replies that follow the event, so an
// error the page logs before a Run returns is recorded when Run returns.
// It must be quick and must not call into the browser.
func (b *Browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning {
			return
		}
		args := make([]string, 0, len(ev.Args))
		for _, a := range ev.Args {
			args = append(args, describe(a))
		}
		b.add("console.%s: %s%s", ev.Type, strings.Join(args, " "), stackPlace(ev.StackTrace))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			// The description of an Error is its message and stack; the
			// first line is enough to recognise it.
			desc, _, _ := strings.Cut(describe(d.Exception), "\n")
			msg += " " + desc
		}
		b.add("uncaught exception: %s (%s:%d)", msg, d.URL, d.LineNumber+1)
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError && e.Level != log.EntryLevelWarning {
			return
		}
		place := ""
		if e.URL != "" {
			place = " (" + e.URL + ")"
		}
		b.add("%s %s: %s%s", e.Source, e.Level, e.Text, place)
	}
}

// describe is how the console would show one value.
func describe(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	if o.Type == runtime.RemoteObjectTypeString {
		var s string
		if err := json.Unmarshal(o.Value, &s); err == nil {
			return s
		}
	}
	if o.Description != "" {
		return o.Description
	}
	if len(o.Value) > 0 {
		return string(o.Value)
	}
	return string(o.Type)
}

// stackPlace is " (url:line)" of the innermost frame, or "".
func stackPlace(st *runtime.StackTrace) string {
	if st == nil || len(st.CallFrames) == 0 {
		return ""
	}
	f := st.CallFrames[0]
	return fmt.Sprintf(" (%s:%d)", f.URL, f.LineNumber+1)
}

func (b *Browser) add(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// Errors returns, in order, the console errors and warnings, uncaught
// exceptions and browser log errors and warnings seen so far, each as one
// line that says where it came from (for example "console.error: ...",
// "uncaught exception: ...", "network error: ... (URL)").
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Context returns the tab's context, for chromedp calls Run does not
// cover. Derive a context with a timeout from it; never cancel it.
func (b *Browser) Context() context.Context { return b.ctx }

// Run runs actions on the tab in order, all within RunTimeout.
func (b *Browser) Run(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, RunTimeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Eval evaluates the JavaScript expression expr in the page, within
// RunTimeout, and returns its value decoded as T.
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, RunTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// WaitFor evaluates the JavaScript expression expr in the page until it
// is true, for at most timeout; what says what is awaited, for the error,
// which also carries the last value or error seen.
func (b *Browser) WaitFor(timeout time.Duration, what, expr string) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last string
	// The count bounds the loop even if each evaluation returned at once
	// with the deadline somehow never reached.
	for n := int(timeout/pollInterval) + 1; n > 0; n-- {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		switch {
		case err == nil:
			last = "false"
		case ctx.Err() == nil || last == "":
			// An evaluation cut short by the deadline says nothing
			// about the page; keep what the one before saw.
			last = "error " + err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v (%s was %s)", what, timeout, expr, last)
		case <-tick.C:
		}
	}
	return fmt.Errorf("%s: not within %v (%s was %s)", what, timeout, expr, last)
}

// Screenshot writes a PNG of the whole page, beyond the window if the page
// is longer, to path.
func (b *Browser) Screenshot(path string) error {
	ctx, cancel := context.WithTimeout(b.ctx, RunTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
