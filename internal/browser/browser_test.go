package browser

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// pages is a small site: one page that does everything right and one that
// does, in every way the helper should notice, something wrong.
func pages(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Content-Security-Policy", "default-src 'self'")
			w.Write([]byte("<!doctype html><html lang=en><head><meta charset=utf-8><title>t</title>" +
				`<link rel="icon" href="/icon.svg"></head><body>` + body + "</body></html>"))
		}
	}
	script := func(js string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/javascript")
			w.Write([]byte(js))
		}
	}
	mux.HandleFunc("GET /icon.svg", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Write([]byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"/>`))
	})
	mux.HandleFunc("GET /clean", page(`<p id="p">fine</p><script src="/clean.js"></script>`))
	mux.HandleFunc("GET /clean.js", script(`console.log("only talking"); document.getElementById("p").dataset.ran = "yes";`))
	mux.HandleFunc("GET /noisy", page(`<script src="/noisy.js"></script>`+
		`<script>window.inlineRan = true;</script><img src="/missing.png" alt="">`))
	mux.HandleFunc("GET /noisy.js", script(`console.log("only talking");
console.error("error-marker", 42);
console.warn("warn-marker");
setTimeout(() => { throw new Error("thrown-marker"); }, 0);`))
	// Listen on the loopback address explicitly: a name would be looked up.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestCleanPageHasNoErrors(t *testing.T) {
	srv := pages(t)
	b := New(t)
	if err := b.Run(chromedp.Navigate(srv.URL + "/clean")); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(5*time.Second, "script ran", `document.getElementById("p").dataset.ran === "yes"`); err != nil {
		t.Fatal(err)
	}
	w, err := Eval[int](b, "window.innerWidth")
	if err != nil {
		t.Fatal(err)
	}
	if w != Width {
		t.Errorf("window is %d pixels wide, want %d", w, Width)
	}
	if errs := b.Errors(); len(errs) != 0 {
		t.Errorf("a clean page reported errors: %q", errs)
	}
}

func TestErrorsCollectsWhatWentWrong(t *testing.T) {
	srv := pages(t)
	b := New(t)
	if err := b.Run(chromedp.Navigate(srv.URL + "/noisy")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"console.error: error-marker 42",
		"console.warning: warn-marker",
		"uncaught exception: Uncaught Error: thrown-marker",
		"/missing.png",            // the 404, from the browser's network log
		"Content Security Policy", // the refused inline script
	}
	// The events arrive on their own; poll for them with a deadline (and
	// a count, should the clock misbehave).
	deadline := time.Now().Add(10 * time.Second)
	var missing []string
	for range 200 {
		missing = missing[:0]
		all := strings.Join(b.Errors(), "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("Errors() lacks %q; it has:\n%s", missing, strings.Join(b.Errors(), "\n"))
	}
	for _, e := range b.Errors() {
		t.Logf("collected: %s", e)
		if strings.Contains(e, "only talking") {
			t.Errorf("console.log was collected as an error: %q", e)
		}
	}
	if ran, err := Eval[bool](b, "window.inlineRan === true"); err != nil || ran {
		t.Errorf("inline script ran under the CSP (%v, %v)", ran, err)
	}
}

func TestScreenshotWritesPNG(t *testing.T) {
	srv := pages(t)
	b := New(t)
	if err := b.Run(chromedp.Navigate(srv.URL + "/clean")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "page.png")
	if err := b.Screenshot(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG (%d bytes, starts %q)", path, len(data), data[:min(8, len(data))])
	}
}

func TestWaitForGivesUp(t *testing.T) {
	srv := pages(t)
	b := New(t)
	if err := b.Run(chromedp.Navigate(srv.URL + "/clean")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := b.WaitFor(300*time.Millisecond, "never", "1 === 2")
	if err == nil {
		t.Fatal("WaitFor of a false condition returned nil")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("WaitFor took %v for a 300ms timeout", d)
	}
	if !strings.Contains(err.Error(), "never") || !strings.Contains(err.Error(), "false") {
		t.Errorf("error %q does not say what was awaited and what was seen", err)
	}
}
