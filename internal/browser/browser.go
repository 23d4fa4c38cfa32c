// Package browser drives Debian's headless Chromium from tests, through
// the DevTools protocol (github.com/chromedp/chromedp), and collects what
// a person would see go wrong: console errors and warnings, uncaught
// exceptions, failed loads. A test without Chromium installed skips.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is one headless Chromium with one page.
type Browser struct {
	t   *testing.T
	ctx context.Context // the page's; its first use started the browser

	mu       sync.Mutex
	problems []string
}

// find returns Chromium's path, or "".
func find() string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// New starts Chromium for t, with a page of 1366x900 (a laptop screen),
// and stops it when t ends. Without Chromium the test is skipped.
func New(t *testing.T) *Browser {
	t.Helper()
	path := find()
	if path == "" {
		t.Skip("chromium is not installed; .ci/run installs it (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 900),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &Browser{t: t}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	b.ctx = ctx
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first call starts the browser; it must not run under a timeout,
	// which would stop the browser with it.
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("chromium: enabling its log: %v", err)
	}
	return b
}

// listen records what the page reports going wrong. It runs on the tab's
// reading goroutine, so it only appends under a lock.
func (b *Browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range ev.Args {
				if a.Description != "" {
					args = append(args, a.Description)
				} else {
					args = append(args, strings.Trim(string(a.Value), `"`))
				}
			}
			b.problem("console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.problem("uncaught exception: %s", msg)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			b.problem("%s %s: %s (%s)", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL)
		}
	}
}

func (b *Browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// Do runs steps on the page, in order, all within timeout.
func (b *Browser) Do(timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// Eval evaluates a JavaScript expression on the page and returns its value.
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// Problems returns the console errors and warnings, uncaught exceptions
// and failed loads seen so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Screenshot writes a PNG of the whole page to path.
func (b *Browser) Screenshot(path string) error {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// WaitFor polls the page's JavaScript expression expr until it is true,
// for at most timeout; what says why it is awaited, for the error.
func (b *Browser) WaitFor(timeout time.Duration, what, expr string) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := Eval[bool](b, expr)
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (%s; last error %v)", what, timeout, expr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
