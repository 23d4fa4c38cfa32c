package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relay/internal/testcert"
)

// tlsRelay is relay with a cleartext and a TLS listener and h2c on, over
// one backend that records the X-Forwarded-Proto of what it is sent.
type tlsRelay struct {
	*relay
	tlsAddr string
	file    string
	ca      *testcert.CA
	mu      sync.Mutex
	protos  []string // X-Forwarded-Proto, in the order requests arrived
}

func certsYAML(pairs ...*testcert.Pair) string {
	var b strings.Builder
	b.WriteString("tls_certificates:\n")
	for _, p := range pairs {
		fmt.Fprintf(&b, "  - cert_file: %s\n    key_file: %s\n", p.CertFile, p.KeyFile)
	}
	return b.String()
}

func startTLSRelay(t *testing.T, ca *testcert.CA, extra string, pairs ...*testcert.Pair) *tlsRelay {
	t.Helper()
	tr := &tlsRelay{ca: ca}
	be := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Forwarded-For") != "" { // not a health check
				tr.mu.Lock()
				tr.protos = append(tr.protos, r.Header.Get("X-Forwarded-Proto"))
				tr.mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	tr.file = writeConfig(t, "tls_listen: 127.0.0.1:0\nh2c: true\naccess_log: true\n"+extra+certsYAML(pairs...)+backendsYAML([]string{be.url}))
	r, started := startRelay(t, "", "-config", tr.file)
	tr.relay = r
	_, port, err := net.SplitHostPort(started.Str("tls_listen"))
	if err != nil {
		t.Fatalf("relay started without a tls_listen address: %v", started)
	}
	tr.tlsAddr = net.JoinHostPort("127.0.0.1", port)
	return tr
}

// client is an HTTPS client trusting the test CA that asks for name by
// SNI and speaks HTTP/2 when h2 is set, HTTP/1.1 otherwise.
func (tr *tlsRelay) client(t *testing.T, name string, h2 bool) *http.Client {
	t.Helper()
	tp := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: tr.ca.Pool, ServerName: name},
		// A dial to any host name lands on relay's TLS port.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", tr.tlsAddr)
		},
	}
	if h2 {
		tp.ForceAttemptHTTP2 = true
	} else {
		tp.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tp.CloseIdleConnections)
	return &http.Client{Transport: tp, Timeout: 10 * time.Second}
}

// fetch GETs path from relay's TLS port with c and returns the response
// (body read) and the certificate relay presented.
func fetch(t *testing.T, c *http.Client, name, path string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get("https://" + name + path)
	if err != nil {
		t.Fatalf("GET https://%s%s: %v", name, path, err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(string(body), "Hello World from") {
		t.Fatalf("GET https://%s%s over %s: %d %q", name, path, res.Proto, res.StatusCode, body)
	}
	return res, res.TLS.PeerCertificates[0].Subject.CommonName
}

// relay terminates TLS with the certificate the client names (SNI),
// ECDSA or RSA, the first for names it does not hold, and serves HTTP/1.1
// over TLS with its own engine and HTTP/2 by ALPN; h2c with prior
// knowledge works on the cleartext port. Backends learn the scheme.
func TestTLSTermination(t *testing.T) {
	forProcesses(t, tlsTermination)
}

func tlsTermination(t *testing.T, processes int) {
	ca := testcert.NewCA(t)
	a := ca.Server(t, testcert.ECDSA, "a.example")
	b := ca.Server(t, testcert.RSA, "b.example")
	tr := startTLSRelay(t, ca, fmt.Sprintf("processes: %d\n", processes), a, b)

	for _, h2 := range []bool{false, true} {
		res, cn := fetch(t, tr.client(t, "a.example", h2), "a.example", "/")
		if cn != "a.example" {
			t.Errorf("SNI a.example got the certificate of %s", cn)
		}
		if want := map[bool]int{false: 1, true: 2}[h2]; res.ProtoMajor != want {
			t.Errorf("h2=%v: answered over %s", h2, res.Proto)
		}
		if res.TLS.Version < tls.VersionTLS12 {
			t.Errorf("TLS version %x", res.TLS.Version)
		}
	}
	if _, cn := fetch(t, tr.client(t, "b.example", false), "b.example", "/"); cn != "b.example" {
		t.Errorf("SNI b.example got the certificate of %s", cn)
	}
	// A name relay holds no certificate for gets the first one.
	c := tr.client(t, "c.example", false)
	c.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	if _, cn := fetch(t, c, "c.example", "/"); cn != "a.example" {
		t.Errorf("an unknown name got the certificate of %s, want the first (a.example)", cn)
	}

	// h2c with prior knowledge on the cleartext port.
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protos}, Timeout: 10 * time.Second}
	res, err := h2c.Get(tr.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != 200 || !strings.HasPrefix(string(body), "Hello World") {
		t.Errorf("h2c: %s %d %q", res.Proto, res.StatusCode, body)
	}
	// Plain HTTP/1.1 on the same port still works.
	if code, _ := get(t, newClient(t), tr.url("/")); code != 200 {
		t.Errorf("HTTP/1.1 on the cleartext port with h2c on: %d", code)
	}

	tr.mu.Lock()
	got := strings.Join(tr.protos, ",")
	tr.mu.Unlock()
	if want := "https,https,https,https,http,http"; got != want {
		t.Errorf("X-Forwarded-Proto the backend saw: %s, want %s", got, want)
	}

	// The access log says how each request came.
	var seen []string
	tr.waitLog(5*time.Second, func(logLine) bool {
		seen = seen[:0]
		for _, l := range tr.logs() {
			if l.Msg() == "access" {
				seen = append(seen, fmt.Sprintf("%s/%v", l.Str("proto"), l["tls"] == true))
			}
		}
		return len(seen) >= 6
	})
	// With two processes lines reach the log in the order each process
	// flushes them; compare them as a set.
	slices.Sort(seen)
	if want := "HTTP/1.1/false HTTP/1.1/true HTTP/1.1/true HTTP/1.1/true HTTP/2.0/false HTTP/2.0/true"; strings.Join(seen, " ") != want {
		t.Errorf("access log protocols: %v, want %s", seen, want)
	}
}

// curl, where installed, gets the backend's answer over TLS with HTTP/2
// and over h2c with prior knowledge.
func TestCurlOverTLSAndH2C(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	if out, _ := exec.Command(curl, "--version").Output(); !strings.Contains(string(out), "HTTP2") {
		t.Skip("this curl has no HTTP/2")
	}
	ca := testcert.NewCA(t)
	tr := startTLSRelay(t, ca, "", ca.Server(t, testcert.ECDSA, "a.example"))
	_, port, _ := net.SplitHostPort(tr.tlsAddr)
	for _, args := range [][]string{
		{"--http2", "--cacert", ca.File, "--resolve", "a.example:" + port + ":127.0.0.1", "https://a.example:" + port + "/"},
		{"--http1.1", "--cacert", ca.File, "--resolve", "a.example:" + port + ":127.0.0.1", "https://a.example:" + port + "/"},
		{"--http2-prior-knowledge", tr.url("/")},
	} {
		out, err := exec.Command(curl, append([]string{"-sS", "--max-time", "10", "-o", "-", "-w", "\n%{http_version} %{http_code}"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		want := map[string]string{"--http2": "\n2 200", "--http1.1": "\n1.1 200", "--http2-prior-knowledge": "\n2 200"}[args[0]]
		if !strings.HasPrefix(string(out), "Hello World from") || !strings.HasSuffix(string(out), want) {
			t.Errorf("curl %s: %q", args[0], out)
		}
	}
}

// A reload with a new certificate serves it to new connections while a
// connection opened before keeps working; a reload with a key that does
// not match is refused, and -check says why, and the certificate in use
// keeps serving.
func TestTLSCertificateReload(t *testing.T) {
	ca := testcert.NewCA(t)
	first := ca.Server(t, testcert.ECDSA, "a.example")
	tr := startTLSRelay(t, ca, "", first)
	old := tr.client(t, "a.example", false)
	fetch(t, old, "a.example", "/")

	second := ca.Server(t, testcert.ECDSA, "a.example")
	reload := func(pairs ...*testcert.Pair) {
		t.Helper()
		before := len(tr.logs())
		writeFile(t, "", tr.file, strings.Replace(readFile(t, tr.file), certsYAML(first), certsYAML(pairs...), 1))
		tr.signal(syscall.SIGHUP)
		if _, ok := tr.waitLog(10*time.Second, func(l logLine) bool {
			return len(tr.logs()) > before && (l.Msg() == "configuration reloaded" || strings.HasPrefix(l.Msg(), "reload refused"))
		}); !ok {
			t.Fatalf("no reload outcome in the log:\n%s", tr.stdout.text())
		}
	}
	reload(second)
	serial := func(c *http.Client) string {
		t.Helper()
		res, err := c.Get("https://a.example/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.TLS.PeerCertificates[0].SerialNumber.String()
	}
	// The control logs the reload before the serving side has taken it.
	newSerial := func(want string) string {
		var got string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if got = serial(tr.client(t, "a.example", false)); got == want {
				break
			}
		}
		return got
	}
	if got := newSerial(second.Cert.SerialNumber.String()); got != second.Cert.SerialNumber.String() {
		t.Errorf("a new connection after the reload got serial %s, want the new certificate's %s", got, second.Cert.SerialNumber)
	}
	// The connection opened before the reload is reused and still answers.
	reused := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	})
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://a.example/", nil)
	res, err := old.Do(req)
	if err != nil {
		t.Fatalf("the connection opened before the reload: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if !reused || res.TLS.PeerCertificates[0].SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		t.Errorf("old connection: reused %v, serial %s; want the first certificate's connection reused", reused, res.TLS.PeerCertificates[0].SerialNumber)
	}

	// A key that belongs to another certificate: -check and reload refuse.
	third := ca.Server(t, testcert.ECDSA, "a.example")
	mismatched := &testcert.Pair{CertFile: third.CertFile, KeyFile: first.KeyFile}
	first = second // the file now names second
	reload(mismatched)
	if l, ok := tr.waitLog(time.Second, func(l logLine) bool { return strings.HasPrefix(l.Msg(), "reload refused") }); !ok ||
		!strings.Contains(fmt.Sprint(l["problems"]), "the private key does not belong to the certificate") {
		t.Errorf("reload of a mismatched pair: %v", l)
	}
	if got := serial(tr.client(t, "a.example", false)); got != second.Cert.SerialNumber.String() {
		t.Errorf("after a refused reload new connections got serial %s, want %s still", got, second.Cert.SerialNumber)
	}
	code, _, stderr := runRelay(t, "-check", "-config", tr.file)
	if code == 0 || !strings.Contains(stderr, "the private key does not belong to the certificate") {
		t.Errorf("relay -check on a mismatched pair: exit %d\n%s", code, stderr)
	}
}

// An https backend named in the file, with its CA, is checked and served
// over TLS by every process; one the admin API adds gets the
// backend_tls_ defaults.
func TestHTTPSBackends(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		ca := testcert.NewCA(t)
		pair := ca.Server(t, testcert.ECDSA, "127.0.0.1")
		start := func() *httptest.Server {
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "tls %v", r.TLS != nil)
			}))
			s.TLS = &tls.Config{Certificates: []tls.Certificate{pair.TLS}}
			s.StartTLS()
			t.Cleanup(s.Close)
			return s
		}
		first, second := start(), start()
		file := writeConfig(t, fmt.Sprintf("processes: %d\nbackend_tls_ca_file: %s\nbackends:\n  - url: %s\n    tls_ca_file: %s\n",
			processes, ca.File, first.URL, ca.File))
		r, started := startRelay(t, "", "-config", file)
		admin := adminOf(t, started)
		c := newClient(t)
		if code, body := get(t, c, r.url("/")); code != 200 || body != "tls true" {
			t.Fatalf("through relay: %d %q", code, body)
		}
		if code, v := adminCall(t, admin, "POST", "/api/backends", fmt.Sprintf(`{"url": %q}`, second.URL)); code != 201 && code != 200 {
			t.Fatalf("adding %s: %d %v", second.URL, code, v)
		}
		// Both are checked over TLS and found healthy, and both answer.
		deadline := time.Now().Add(10 * time.Second)
		for {
			bs := backendsOf(t, admin)
			if len(bs) == 2 && bs[first.URL]["healthy"] == true && bs[second.URL]["healthy"] == true {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("backends not both healthy: %v", bs)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for range 8 {
			if code, body := get(t, c, r.url("/")); code != 200 || body != "tls true" {
				t.Fatalf("through relay: %d %q", code, body)
			}
		}
		if strings.Contains(r.stdout.text(), "backend unreachable") {
			t.Errorf("relay could not reach an https backend:\n%s", r.stdout.text())
		}
	})
}

// With several processes a client resumes its TLS session whichever
// process takes its next connection, and a ticket issued before a reload
// still resumes after it.
func TestTLSSessionsResumeAcrossProcessesAndReloads(t *testing.T) {
	ca := testcert.NewCA(t)
	var mu sync.Mutex
	upstream := map[string]bool{} // relay's connections to the backend
	be := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Forwarded-For") != "" {
				mu.Lock()
				upstream[r.RemoteAddr] = true
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	file := writeConfig(t, "processes: 2\ntls_listen: 127.0.0.1:0\n"+certsYAML(ca.Server(t, testcert.ECDSA, "a.example"))+backendsYAML([]string{be.url}))
	r, started := startRelay(t, "", "-config", file)
	_, port, _ := net.SplitHostPort(started.Str("tls_listen"))
	addr := net.JoinHostPort("127.0.0.1", port)

	cache := tls.NewLRUClientSessionCache(4)
	// connect sends one request over a new connection and reports whether
	// its handshake resumed a session.
	connect := func() bool {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "a.example", ClientSessionCache: cache, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n")
		// Reading the whole answer also takes in the session ticket.
		if b, err := io.ReadAll(c); err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 200 ") {
			t.Fatalf("answer %.40q (%v)", b, err)
		}
		return c.ConnectionState().DidResume
	}
	connect()
	const n = 40
	resumed := 0
	for range n {
		if connect() {
			resumed++
		}
	}
	mu.Lock()
	conns := len(upstream)
	mu.Unlock()
	t.Logf("%d of %d connections resumed; relay used %d upstream connections", resumed, n, conns)
	if resumed != n {
		t.Errorf("%d of %d connections resumed their TLS session", resumed, n)
	}
	if conns < 2 {
		t.Log("every connection reached the same process: this run proves less than it should")
	}

	r.signal(syscall.SIGHUP)
	if _, ok := r.waitLog(10*time.Second, func(l logLine) bool { return l.Msg() == "configuration reloaded" }); !ok {
		t.Fatal("relay did not reload")
	}
	time.Sleep(300 * time.Millisecond) // the processes take the new keys
	resumed = 0
	for range n / 2 {
		if connect() {
			resumed++
		}
	}
	if resumed != n/2 {
		t.Errorf("after a reload %d of %d connections resumed their TLS session", resumed, n/2)
	}
}
