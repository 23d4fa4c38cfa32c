package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relay/internal/browser"
)

// attackPage is what a web site the operator opens could serve. attack
// tries what a page on another origin can send to the admin API without
// anyone's help: a form POST (url-encoded, and text/plain carrying JSON),
// no-cors fetches, a JSON fetch that needs a CORS preflight, and a read.
// rebound runs once the page's own name leads to the admin listener, as
// after DNS rebinding, and calls the API as the page's own origin.
const attackPage = `<!doctype html>
<meta charset="utf-8">
<title>an ordinary page</title>
<iframe name="sink" id="sink"></iframe>
<script>
"use strict";
// formPost submits a form into the hidden frame and waits for the frame
// to load whatever came back; the page cannot read it.
function formPost(action, enctype, name, value) {
  return new Promise((resolve) => {
    const f = document.createElement("form");
    f.method = "POST";
    f.action = action;
    f.enctype = enctype;
    f.target = "sink";
    const i = document.createElement("input");
    i.type = "hidden";
    i.name = name;
    i.value = value;
    f.appendChild(i);
    document.body.appendChild(f);
    const frame = document.getElementById("sink");
    const timer = setTimeout(() => resolve("no load within 5 s"), 5000);
    frame.onload = () => { clearTimeout(timer); resolve("sent"); };
    f.submit();
  });
}

async function attempt(what) {
  try {
    return await what();
  } catch (e) {
    return "refused by the browser: " + e.message;
  }
}

window.attack = async (admin, victim, own) => {
  const one = admin + "/api/backends/" + encodeURIComponent(victim);
  const add = JSON.stringify({ url: own, weight: 1000 });
  const out = {};
  out.formDisable = await formPost(one + "/disable", "application/x-www-form-urlencoded", "x", "1");
  // The body reads {"url": ..., "weight": 1000}= , which a lenient JSON
  // reader takes for the object.
  out.formAdd = await formPost(admin + "/api/backends", "text/plain", add, "");
  out.noCorsAdd = await attempt(async () => (await fetch(admin + "/api/backends",
    { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: add })).type);
  out.noCorsDrain = await attempt(async () => (await fetch(one + "/drain", { method: "POST", mode: "no-cors" })).type);
  out.noCorsReload = await attempt(async () => (await fetch(admin + "/reload", { method: "POST", mode: "no-cors" })).type);
  out.corsJSON = await attempt(async () => "answered " + (await fetch(one + "/disable",
    { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" })).status);
  out.corsDelete = await attempt(async () => "answered " + (await fetch(one, { method: "DELETE" })).status);
  out.read = await attempt(async () => "read " + (await (await fetch(admin + "/api/backends")).text()));
  return out;
};

window.rebound = async (victim) => {
  const one = "/api/backends/" + encodeURIComponent(victim);
  const get = async (path) => {
    const r = await fetch(path, { cache: "no-store" });
    return r.status + " " + (await r.text());
  };
  return {
    list: await attempt(() => get("/api/backends")),
    metrics: await attempt(() => get("/metrics")),
    pprof: await attempt(() => get("/debug/pprof/cmdline")),
    dashboard: await attempt(() => get("/")),
    disable: await attempt(async () => String((await fetch(one + "/disable",
      { method: "POST", headers: { "Content-Type": "application/json" } })).status)),
    add: await attempt(async () => String((await fetch("/api/backends",
      { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ url: "http://127.0.0.1:9", weight: 1000 }) })).status)),
  };
};
</script>
`

// rebinder is a host name's port whose server changes under it, as DNS
// rebinding does to a name: connections go to before until rebind is set,
// then to after. A connection is sent on when its first byte arrives, so
// one the browser opened ahead goes where its request is meant to.
type rebinder struct {
	ln            net.Listener
	before, after string
	rebind        atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newRebinder(t *testing.T, before, after string) *rebinder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rebinder{ln: ln, before: before, after: after, conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !r.track(c) {
				c.Close()
				return
			}
			r.wg.Add(1)
			go r.splice(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for c := range r.conns {
			c.Close()
		}
		r.conns = nil
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// track registers c for closing at the end; false once that began.
func (r *rebinder) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		return false
	}
	r.conns[c] = true
	return true
}

func (r *rebinder) port() string { return strconv.Itoa(r.ln.Addr().(*net.TCPAddr).Port) }

func (r *rebinder) splice(c net.Conn) {
	defer r.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.Peek(1); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	to := r.before
	if r.rebind.Load() {
		to = r.after
	}
	u, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		return
	}
	if !r.track(u) {
		u.Close()
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(u, br)
		u.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, u)
		c.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	<-done
	<-done
}

// evalAsync runs an async JavaScript expression in the page and returns
// its result, within browser.RunTimeout.
func evalAsync[T any](t *testing.T, b *browser.Browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), browser.RunTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestAWebPageCannotSteerRelay opens, in headless Chromium, a page on
// another origin that tries to steer relay's admin API (the default
// loopback listener without a token): disable a backend with a form POST,
// add its own server as a backend with a no-cors fetch, read the pool;
// then, its name rebound to the admin listener, read and change it as its
// own origin. Nothing changes and nothing is read; the dashboard, on the
// listener's own origin, still drains a backend.
func TestAWebPageCannotSteerRelay(t *testing.T) {
	b := browser.New(t, chromedp.Flag("host-resolver-rules", "MAP attacker.test 127.0.0.1"))
	a := newAdmin(t, Options{})
	admin := a.srv.URL
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A new connection for every request, so that none made before
		// the name is rebound is used after.
		w.Header().Set("Connection", "close")
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, attackPage)
	}))
	t.Cleanup(page.Close)
	rb := newRebinder(t, page.Listener.Addr().String(), a.srv.Listener.Addr().String())
	victim := poolURLs[0]
	call := fmt.Sprintf("attack(%q, %q, %q)", admin, victim, page.URL)

	// From another port on the same machine (same-site to the admin
	// listener), then from another site.
	for _, origin := range []string{page.URL, "http://attacker.test:" + rb.port()} {
		if err := b.Run(chromedp.Navigate(origin + "/")); err != nil {
			t.Fatal(err)
		}
		got := evalAsync[map[string]string](t, b, call)
		t.Logf("from %s: %v", origin, got)
		if got["formDisable"] != "sent" || got["formAdd"] != "sent" || got["noCorsAdd"] != "opaque" || got["noCorsDrain"] != "opaque" {
			t.Errorf("from %s the page could not even send its requests (%v); the test proves nothing", origin, got)
		}
		for _, k := range []string{"corsJSON", "corsDelete", "read"} {
			if !strings.HasPrefix(got[k], "refused by the browser") {
				t.Errorf("from %s %s: %q; want the browser to refuse it", origin, k, got[k])
			}
		}
		if s := a.state(); s != initialState() {
			t.Fatalf("a page on %s changed relay's pool:\n%s", origin, s)
		}
	}

	// DNS rebinding: attacker.test's port now leads to the admin listener,
	// and the page calls the API as its own origin.
	rb.rebind.Store(true)
	got := evalAsync[map[string]string](t, b, fmt.Sprintf("rebound(%q)", victim))
	t.Logf("after rebinding: %v", got)
	for _, k := range []string{"list", "metrics", "pprof", "dashboard", "disable", "add"} {
		if !strings.HasPrefix(got[k], "421") || strings.Contains(got[k], victim) {
			t.Errorf("after rebinding, %s: %.200q; want 421 and nothing of relay's", k, got[k])
		}
	}
	if s := a.state(); s != initialState() {
		t.Fatalf("a rebound page changed relay's pool:\n%s", s)
	}

	// Each attempt reached the admin listener and was refused there.
	// (Chromium tries a request answered 421 once more, on a new
	// connection, as RFC 9110 allows; that one is refused too.)
	served := a.served()
	esc := "/api/backends/" + victim // as the handler sees the path, unescaped
	for _, want := range []string{
		"POST " + esc + "/disable 403", "POST /api/backends 403", "POST " + esc + "/drain 403", "POST /reload 403",
		"OPTIONS " + esc + "/disable 403", "OPTIONS " + esc + " 403", "GET /api/backends 403",
		"GET /api/backends 421", "GET /metrics 421", "GET /debug/pprof/cmdline 421", "GET / 421",
		"POST " + esc + "/disable 421", "POST /api/backends 421",
	} {
		if !slices.Contains(served, want) {
			t.Errorf("the admin listener never answered %q; it answered %q", want, served)
		}
	}
	for _, s := range served {
		if !strings.HasSuffix(s, " 403") && !strings.HasSuffix(s, " 421") && !strings.HasSuffix(s, " 404") {
			t.Errorf("the admin listener answered %q to the page", s)
		}
	}

	// The dashboard, on the listener's own origin, works as before.
	before := len(b.Errors())
	if err := b.Run(chromedp.Navigate(admin + "/")); err != nil {
		t.Fatal(err)
	}
	row := func(u string) string { return fmt.Sprintf(`document.querySelector('tr[data-backend=%q]')`, u) }
	if err := b.WaitFor(10*time.Second, "every backend listed", row(poolURLs[0])+` !== null && `+row(poolURLs[1])+` !== null`); err != nil {
		t.Fatal(err)
	}
	if err := b.Run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-backend=%q] button[data-action="drain"]`, poolURLs[1])))); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(5*time.Second, "the drained backend shown drained", `['draining','drained'].includes(`+row(poolURLs[1])+`?.querySelector('.badge')?.textContent)`); err != nil {
		t.Fatal(err)
	}
	if s := a.state(); !strings.Contains(s, poolURLs[1]+" weight=1 draining=true") {
		t.Fatalf("after the dashboard's Drain relay holds:\n%s", s)
	}
	if errs := b.Errors()[before:]; len(errs) > 0 {
		t.Fatalf("the dashboard reported problems:\n%s", strings.Join(errs, "\n"))
	}
}
