package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relay/internal/browser"
)

// TestDashboardInABrowser loads the dashboard of a relay with two serving
// processes in headless Chromium: the page shows every backend with no
// console error, reflects a backend going down within seconds, and its
// Drain button drains that backend in relay. It writes a screenshot to
// $RELAY_SCREENSHOT_DIR (or the test's temporary directory).
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	b := browser.New(t)
	bs := newBackends(t, 3)
	_, started := startRelay(t, "", "-config", writeConfig(t, "processes: 2\naccess_log: false\n"+
		"health_check_interval: 300ms\nhealth_check_timeout: 200ms\nhealth_check_fall: 1\nhealth_check_rise: 1\n"+backendsYAML(urlsOf(bs))))
	admin := adminOf(t, started)
	relayAddr := "http://127.0.0.1:" + portOf(t, started.Str("listen"))

	// A little traffic, so rates and latencies show; bounded in time.
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) })
	go func() {
		c := &http.Client{Timeout: 5 * time.Second}
		for end := time.Now().Add(60 * time.Second); !stop.Load() && time.Now().Before(end); {
			if resp, err := c.Get(relayAddr + "/"); err == nil {
				resp.Body.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	if err := b.Run(chromedp.Navigate(admin + "/")); err != nil {
		t.Fatal(err)
	}
	row := func(u string) string { return fmt.Sprintf(`document.querySelector('tr[data-backend=%q]')`, u) }
	badge := func(u string) string { return row(u) + `?.querySelector('.badge')?.textContent` }
	if err := b.WaitFor(10*time.Second, "every backend listed", `document.querySelectorAll('#backends tbody tr[data-backend]').length === 3 && `+
		strings.Join([]string{row(bs[0].url) + ` !== null`, row(bs[1].url) + ` !== null`, row(bs[2].url) + ` !== null`}, " && ")); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(10*time.Second, "a live status and a request rate", `document.getElementById('status-text').textContent.startsWith('live') && `+
		`document.getElementById('t-rps').textContent !== '–'`); err != nil {
		t.Fatal(err)
	}

	down := bs[1]
	down.health.SetFailing(true)
	went := time.Now()
	if err := b.WaitFor(5*time.Second, "the failing backend shown down", badge(down.url)+` === 'down'`); err != nil {
		t.Fatal(err)
	}
	t.Logf("the page showed the backend down %v after its health check started failing", time.Since(went).Round(10*time.Millisecond))

	drained := bs[2]
	if err := b.Run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-backend=%q] button[data-action="drain"]`, drained.url)))); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(5*time.Second, "the drained backend shown drained", `['draining','drained'].includes(`+badge(drained.url)+`)`); err != nil {
		t.Fatal(err)
	}
	if v := backendsOf(t, admin)[drained.url]; v["draining"] != true {
		t.Fatalf("after the click relay lists the backend as %v; want draining", v)
	}
	down.health.SetFailing(false)
	if err := b.WaitFor(5*time.Second, "the backend back up", badge(down.url)+` === 'up'`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // a few more polls, for the charts

	dir := os.Getenv("RELAY_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "dashboard.png")
	if err := b.Screenshot(shot); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	if ps := b.Errors(); len(ps) > 0 {
		t.Fatalf("the page reported problems:\n%s", strings.Join(ps, "\n"))
	}
}
