package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// connCountingBackend is a net/http backend on 127.0.0.1 that counts its
// open connections through ConnState and records the most it had open at
// once. It answers GET at once and reads POST bodies whole, answering
// their length.
type connCountingBackend struct {
	ln       *countingListener
	srv      *http.Server
	open     atomic.Int64
	maxOpen  atomic.Int64
	requests atomic.Int64
	// bigPosts counts requests that announced slowBodyLength: only the
	// slow-body clients send those, so none may reach the backend.
	bigPosts atomic.Int64
}

func newConnCountingBackend(t *testing.T) *connCountingBackend {
	t.Helper()
	cb := &connCountingBackend{ln: listen(t)}
	cb.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cb.requests.Add(1)
			if r.ContentLength == slowBodyLength {
				cb.bigPosts.Add(1)
			}
			if r.Method != "POST" {
				io.WriteString(w, "ok")
				return
			}
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			io.WriteString(w, strconv.FormatInt(n, 10))
		}),
		// Set before Serve, so every connection is seen from its start.
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				n := cb.open.Add(1)
				for {
					m := cb.maxOpen.Load()
					if n <= m || cb.maxOpen.CompareAndSwap(m, n) {
						break
					}
				}
			case http.StateClosed, http.StateHijacked:
				cb.open.Add(-1)
			}
		},
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		cb.srv.Serve(cb.ln)
	}()
	t.Cleanup(func() {
		cb.srv.Close()
		<-served
	})
	return cb
}

// slowBodyLength is the Content-Length the slow-body clients announce and
// never finish: below body_buffer_bytes, so relay holds the body before it
// picks a backend.
const slowBodyLength = 10000

// slowClient is what one slow client saw.
type slowClient struct {
	head    bool          // a slow head; else a slow body
	dialErr error         // the dial failed: the client never ran
	dialed  time.Time     // before the dial
	started time.Time     // before its first bytes were written
	sent    int           // bytes dribbled after the first write
	closed  time.Duration // from started until relay closed; -1 if it did not
	err     error         // how the connection ended
	got     []byte        // what relay sent
}

// runSlowClient dials relay, writes first and then one byte of dribble every
// `every`, reading meanwhile, until relay closes the connection or giveUp
// passes.
func runSlowClient(addr string, sc *slowClient, first, dribble string, every time.Duration, giveUp time.Time) {
	sc.closed = -1
	sc.dialed = time.Now()
	var c net.Conn
	for try := 0; ; try++ {
		c, sc.dialErr = net.DialTimeout("tcp", addr, 5*time.Second)
		if sc.dialErr == nil || try == 4 || time.Now().After(giveUp) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sc.dialErr != nil {
		return
	}
	defer c.Close()
	sc.started = time.Now()
	if _, err := io.WriteString(c, first); err != nil {
		sc.closed, sc.err = time.Since(sc.started), err
		return
	}
	buf := make([]byte, 512)
	next := time.Now().Add(every)
	for {
		// The read deadline is the dribble clock: a timeout means it is
		// time for the next byte; anything else is relay's doing.
		c.SetReadDeadline(next)
		n, err := c.Read(buf)
		sc.got = append(sc.got, buf[:n]...)
		if err == nil {
			continue
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			sc.closed, sc.err = time.Since(sc.started), err
			return
		}
		if time.Now().After(giveUp) {
			sc.err = err
			return
		}
		b := dribble[len(dribble)-1]
		if sc.sent < len(dribble) {
			b = dribble[sc.sent]
		}
		if _, err := c.Write([]byte{b}); err != nil {
			sc.closed, sc.err = time.Since(sc.started), err
			return
		}
		sc.sent++
		next = time.Now().Add(every)
	}
}

// quantile returns the q-quantile of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// 1,000 clients dribbling a request head and 1,000 dribbling a held request
// body, beside 20 keep-alive clients doing GETs and small POSTs: every slow
// client is closed (with 408, or a bare close) within client_header_timeout
// from its first byte or client_body_timeout plus a second per
// client_body_min_rate bytes from its head, no slow body reaches a backend,
// the normal clients get 200 every time, and the backend never has more
// connections open than the normal load needs plus a small margin.
func TestThousandsOfSlowClientsBesideNormalLoad(t *testing.T) {
	const (
		perKind       = 1000 // slow heads, and as many slow bodies
		normalClients = 20
		every         = 300 * time.Millisecond // one byte per client
		headerTimeout = time.Second
		bodyTimeout   = time.Second
		bodyMinRate   = 100 // bytes/s: the slow clients send about 3
		normalBody    = 1000
		backendMargin = 10
	)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot read the open-file limit: %v", err)
	}
	// Each slow client is two descriptors in this process, its own socket
	// and relay's, plus the normal load, the backend and the test binary.
	if need := uint64(2*2*perKind + 1000); lim.Cur < need {
		t.Skipf("open-file limit %d is below the %d this test needs (ulimit -n)", lim.Cur, need)
	}
	slack := time.Second
	if raceEnabled {
		slack = 2 * time.Second
	}
	testStart := time.Now()

	be := newConnCountingBackend(t)
	cfg := withDefaults(Config{
		HeaderTimeout: headerTimeout,
		BodyTimeout:   bodyTimeout,
		BodyMinRate:   bodyMinRate,
		IdleTimeout:   time.Minute, // longer than the test: only the bounds above cut
	})
	if cfg.BodyBufferBytes < slowBodyLength {
		t.Fatalf("body_buffer_bytes %d is below the slow bodies' %d: they would not be held", cfg.BodyBufferBytes, slowBodyLength)
	}
	r := startRelayExactly(t, cfg, newBackendFor(t, be.ln.Addr().String(), 1))

	// The normal load: keep-alive clients, one connection each, running
	// until the slow clients are all done.
	stop := make(chan struct{})
	var (
		normalWG   sync.WaitGroup
		normalOK   atomic.Int64
		normalBad  atomic.Int64
		errMu      sync.Mutex
		normalErrs []string
		maxLatency atomic.Int64
	)
	fail := func(format string, args ...any) {
		normalBad.Add(1)
		errMu.Lock()
		if len(normalErrs) < 10 {
			normalErrs = append(normalErrs, fmt.Sprintf(format, args...))
		}
		errMu.Unlock()
	}
	postBody := strings.Repeat("p", normalBody)
	for i := range normalClients {
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: ioTimeout}).DialContext,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
		}
		t.Cleanup(tr.CloseIdleConnections)
		cl := &http.Client{Transport: tr, Timeout: ioTimeout}
		normalWG.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				method, body, want := "GET", io.Reader(nil), "ok"
				if (n+i)%4 == 3 {
					method, body, want = "POST", strings.NewReader(postBody), strconv.Itoa(normalBody)
				}
				req, err := http.NewRequest(method, r.url+"/normal", body)
				if err != nil {
					fail("%v", err)
					return
				}
				start := time.Now()
				resp, err := cl.Do(req)
				if err != nil {
					fail("client %d: %s: %v", i, method, err)
					continue
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				d := int64(time.Since(start))
				for {
					m := maxLatency.Load()
					if d <= m || maxLatency.CompareAndSwap(m, d) {
						break
					}
				}
				switch {
				case err != nil:
					fail("client %d: %s: reading body: %v", i, method, err)
				case resp.StatusCode != 200 || string(got) != want:
					fail("client %d: %s: %d %q, want 200 %q", i, method, resp.StatusCode, got, want)
				default:
					normalOK.Add(1)
				}
			}
		})
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		normalWG.Wait()
	}()
	time.Sleep(200 * time.Millisecond) // the normal load under way first

	// The slow clients, heads and bodies alternating, dialed in batches so
	// the listen backlog is not flooded at once.
	slow := make([]slowClient, 2*perKind)
	giveUp := time.Now().Add(10 * time.Second)
	var slowWG sync.WaitGroup
	const batch = 100
	for i := range slow {
		sc := &slow[i]
		sc.head = i%2 == 0
		slowWG.Go(func() {
			if sc.head {
				runSlowClient(r.addr, sc, "GET / HTTP/1.1\r\nHo", "st: x\r\nX-Slow: aaaa", every, giveUp)
			} else {
				runSlowClient(r.addr, sc, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(slowBodyLength)+"\r\n\r\n", "x", every, giveUp)
			}
		})
		if (i+1)%batch == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	slowWG.Wait()
	time.Sleep(300 * time.Millisecond) // the normal load after them too
	close(stop)
	normalWG.Wait()

	// The slow clients: closed within their bounds, with 408 or nothing.
	var headTimes, bodyTimes []time.Duration
	var heads408, bodies408, bad int
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for i := range slow {
		sc := &slow[i]
		kind := "slow body"
		if sc.head {
			kind = "slow head"
		}
		if sc.dialErr != nil {
			report("%s %d: dial: %v", kind, i, sc.dialErr)
			continue
		}
		if sc.closed < 0 {
			report("%s %d: still open %v after its first byte (sent %d bytes since; got %q)", kind, i, giveUp.Sub(sc.started).Round(time.Millisecond), sc.sent, sc.got)
			continue
		}
		if len(sc.got) > 0 && !bytes.HasPrefix(sc.got, []byte("HTTP/1.1 408 ")) {
			report("%s %d: got %q, want 408 or a bare close", kind, i, sc.got)
		}
		got408 := len(sc.got) > 0
		// Relay's clock starts after the dial began (a head's) or after the
		// head was written (a body's), and ends by the bound plus slack
		// after the first write.
		var low, high time.Duration
		if sc.head {
			headTimes = append(headTimes, sc.closed)
			if got408 {
				heads408++
			}
			low = headerTimeout - sc.started.Sub(sc.dialed)
			high = headerTimeout + slack
		} else {
			bodyTimes = append(bodyTimes, sc.closed)
			if got408 {
				bodies408++
			}
			low = bodyTimeout
			high = bodyTimeout + time.Duration(sc.sent)*time.Second/bodyMinRate + slack
		}
		if sc.closed < low-10*time.Millisecond || sc.closed > high {
			report("%s %d: closed %v after its first byte (%d bytes dribbled, ended by %v), want between %v and %v",
				kind, i, sc.closed.Round(time.Millisecond), sc.sent, sc.err, low.Round(time.Millisecond), high)
		}
	}
	if bad > 10 {
		t.Errorf("... %d slow clients wrong in all", bad)
	}
	// The slow clients were at relay together, not one after another.
	type event struct {
		at    time.Time
		delta int
	}
	var events []event
	for i := range slow {
		if sc := &slow[i]; sc.dialErr == nil && sc.closed >= 0 {
			events = append(events, event{sc.started, 1}, event{sc.started.Add(sc.closed), -1})
		}
	}
	slices.SortFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
	open, peak := 0, 0
	for _, e := range events {
		open += e.delta
		peak = max(peak, open)
	}
	t.Logf("slow clients: at most %d open at once", peak)
	if peak < perKind {
		t.Errorf("at most %d slow clients were open at once, want at least %d for the test to mean anything", peak, perKind)
	}
	slices.Sort(headTimes)
	slices.Sort(bodyTimes)
	t.Logf("slow heads: %d closed, %d with 408; closed after p50 %v, p99 %v, max %v (bound %v + slack %v)",
		len(headTimes), heads408, quantile(headTimes, 0.5).Round(time.Millisecond), quantile(headTimes, 0.99).Round(time.Millisecond),
		quantile(headTimes, 1).Round(time.Millisecond), headerTimeout, slack)
	t.Logf("slow bodies: %d closed, %d with 408; closed after p50 %v, p99 %v, max %v (bound %v + bytes/%d s + slack %v)",
		len(bodyTimes), bodies408, quantile(bodyTimes, 0.5).Round(time.Millisecond), quantile(bodyTimes, 0.99).Round(time.Millisecond),
		quantile(bodyTimes, 1).Round(time.Millisecond), bodyTimeout, bodyMinRate, slack)

	// The normal load: no errors.
	t.Logf("normal load: %d clients, %d requests answered 200, %d failed, slowest %v",
		normalClients, normalOK.Load(), normalBad.Load(), time.Duration(maxLatency.Load()).Round(time.Millisecond))
	if normalBad.Load() > 0 {
		t.Errorf("%d normal requests failed beside the slow clients; first: %s", normalBad.Load(), strings.Join(normalErrs, "; "))
	}
	if normalOK.Load() == 0 {
		t.Errorf("the normal load got nothing through")
	}

	// The backend: no slow body reached it, and it never held more
	// connections than the normal load needs.
	t.Logf("backend: %d requests, %d connections accepted, at most %d open at once",
		be.requests.Load(), be.ln.accepts.Load(), be.maxOpen.Load())
	if n := be.bigPosts.Load(); n != 0 {
		t.Errorf("%d slow bodies reached the backend, want none (held until whole)", n)
	}
	if m := be.maxOpen.Load(); m > normalClients+backendMargin {
		t.Errorf("the backend had %d connections open at once, want at most %d (%d normal clients + %d)",
			m, normalClients+backendMargin, normalClients, backendMargin)
	}
	t.Logf("took %v", time.Since(testStart).Round(time.Millisecond))
}
