package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/control"
	"relay/internal/supervisor"
)

// Backends of the pool every test admin listener steers. Nothing serves
// them: the control holds their state without sending them traffic.
var poolURLs = []string{"http://127.0.0.1:8001", "http://127.0.0.1:8002"}

// testAdmin is the admin handler over a real control, served on a real
// loopback listener.
type testAdmin struct {
	ctl     *control.Control
	srv     *httptest.Server
	reloads atomic.Int32

	mu   sync.Mutex
	seen []string // "METHOD PATH STATUS" of every request answered
}

// newAdmin serves Handler(o) on 127.0.0.1 with a control holding
// poolURLs; o's Control, Reload and Log are filled in.
func newAdmin(t *testing.T, o Options) *testAdmin {
	t.Helper()
	bs := make([]*backend.Backend, len(poolURLs))
	for i, raw := range poolURLs {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if bs[i], err = backend.New(u, 1); err != nil {
			t.Fatal(err)
		}
	}
	a := &testAdmin{}
	a.ctl = control.NewControl(supervisor.ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	o.Control, o.Log = a.ctl, slog.New(slog.DiscardHandler)
	o.Reload = func() (uint64, error) {
		a.reloads.Add(1)
		return 2, nil
	}
	h := Handler(o)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		a.mu.Lock()
		a.seen = append(a.seen, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.code))
		a.mu.Unlock()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// served lists the requests the admin listener answered, each as
// "METHOD PATH STATUS".
func (a *testAdmin) served() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// recorder notes the status a handler answered.
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// port is the port the admin listener is bound to.
func (a *testAdmin) port() string { return strconv.Itoa(a.srv.Listener.Addr().(*net.TCPAddr).Port) }

// state is the pool as the control holds it, one line per backend: its
// name, weight and operator state; and how many reloads were asked for.
func (a *testAdmin) state() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var lines []string
	for _, m := range a.ctl.Status(ctx).Members {
		lines = append(lines, fmt.Sprintf("%s weight=%d draining=%v disabled=%v", m.URL, m.Weight, m.State.Draining, m.State.Disabled))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + fmt.Sprintf("\nreloads=%d", a.reloads.Load())
}

// initialState is state() before anything changed it.
func initialState() string {
	var lines []string
	for _, u := range poolURLs {
		lines = append(lines, u+" weight=1 draining=false disabled=false")
	}
	return strings.Join(lines, "\n") + "\nreloads=0"
}

// answer is one response of the admin listener.
type answer struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

// short is the start of the answer's body, for messages.
func (r answer) short() string {
	if len(r.raw) > 200 {
		return r.raw[:200] + "..."
	}
	return r.raw
}

// errorText is the answer's JSON "error", or "".
func (r answer) errorText() string {
	s, _ := r.body["error"].(string)
	return s
}

// call sends method path to the admin listener with the given header
// fields ("Host" sets the Host header) and body; a field given twice is
// sent twice.
func (a *testAdmin) call(t *testing.T, method, path, body string, fields ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "Host" {
			req.Host = fields[i+1]
			continue
		}
		req.Header.Add(fields[i], fields[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := answer{code: resp.StatusCode, header: resp.Header, raw: string(data)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(data, &out.body); err != nil {
			t.Fatalf("%s %s: the answer is not JSON: %v", method, path, err)
		}
	}
	return out
}
