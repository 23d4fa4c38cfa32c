package h2

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// handOver accepts a connection from ln and returns both ends, and a
// framer for the client's; with preface, the client has sent its
// preface and SETTINGS.
func handOver(t *testing.T, ln net.Listener, preface bool) (client, server net.Conn, fr *http2.Framer) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		client.Close()
		t.Fatal(err)
	}
	client.SetDeadline(time.Now().Add(ioTimeout))
	fr = http2.NewFramer(client, client)
	if preface {
		sendPreface(client, fr)
	}
	return client, server, fr
}

func sendPreface(client net.Conn, fr *http2.Framer) {
	io.WriteString(client, http2.ClientPreface)
	fr.WriteSettings()
}

// shutdownRace hands a connection to a new server just as its Shutdown
// starts, and returns the frame types the client read up to GOAWAY (or
// the end of the connection).
func shutdownRace(t *testing.T, ln net.Listener) []http2.FrameType {
	s := NewServer(core.New(core.Config{}), testBodyTime, Limits{MaxConcurrentStreams: 10, IdleTimeout: time.Minute, HeaderTimeout: ioTimeout}, nil)
	client, server, fr := handOver(t, ln, true)
	defer client.Close()
	ended := make(chan struct{})
	go s.ServeConn(server, func() { close(ended) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	go func() { s.Shutdown(ctx); close(stopped) }()
	types := readUntilGoAway(fr)
	client.Close()
	await(t, stopped, "Shutdown")
	await(t, ended, "ServeConn")
	return types
}

// readUntilGoAway returns the types of the frames fr reads up to GOAWAY
// or the end of the connection.
func readUntilGoAway(fr *http2.Framer) []http2.FrameType {
	var types []http2.FrameType
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return types
		}
		types = append(types, f.Header().Type)
		if f.Header().Type == http2.FrameGoAway {
			return types
		}
	}
}

// A connection handed over just as Shutdown starts still gets GOAWAY, in
// every one of many rounds racing the two: none is left to be cut off
// when shutdown_timeout runs out.
func TestShutdownSendsGoAwayToAConnectionHandedOverAsItStarts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	missed := 0
	for range rounds {
		types := shutdownRace(t, ln)
		if len(types) == 0 || types[len(types)-1] != http2.FrameGoAway {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d connections handed over as Shutdown started got no GOAWAY", missed, rounds)
	}
}

// readingConn reports the first time relay reads from it.
type readingConn struct {
	net.Conn
	once    sync.Once
	reading chan struct{}
}

func (c *readingConn) Read(p []byte) (int, error) {
	c.once.Do(func() { close(c.reading) })
	return c.Conn.Read(p)
}

// A Shutdown that starts while relay waits for a new connection's client
// preface sends GOAWAY after relay's SETTINGS, the server's preface,
// which must be its first frame (RFC 9113 3.4): a GOAWAY before it is a
// protocol error to the client.
func TestShutdownGoAwayComesAfterTheServerPreface(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := NewServer(core.New(core.Config{}), testBodyTime, testLimits(), nil)
	client, server, fr := handOver(t, ln, false)
	defer client.Close()
	rc := &readingConn{Conn: server, reading: make(chan struct{})}
	ended := make(chan struct{})
	go s.ServeConn(rc, func() { close(ended) })
	await(t, rc.reading, "relay reading the client's preface")
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(ctx) }()
	sendPreface(client, fr)
	types := readUntilGoAway(fr)
	if len(types) < 2 || types[0] != http2.FrameSettings || types[len(types)-1] != http2.FrameGoAway {
		t.Errorf("frames %v; want SETTINGS first, then GOAWAY", types)
	}
	client.Close()
	if err := await(t, stopped, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	await(t, ended, "ServeConn")
}

// ServeConn after Shutdown refuses the connection: SETTINGS, then GOAWAY
// with last stream 0 and NO_ERROR, so the client may retry elsewhere.
func TestServeConnAfterShutdownRefusesWithGoAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := NewServer(core.New(core.Config{}), testBodyTime, testLimits(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	client, server, fr := handOver(t, ln, true)
	defer client.Close()
	ended := make(chan struct{})
	go s.ServeConn(server, func() { close(ended) })
	var types []http2.FrameType
	var g *http2.GoAwayFrame
	for g == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %v: %v", types, err)
		}
		types = append(types, f.Header().Type)
		g, _ = f.(*http2.GoAwayFrame)
	}
	if types[0] != http2.FrameSettings || g.LastStreamID != 0 || g.ErrCode != http2.ErrCodeNo {
		t.Errorf("frames %v, GOAWAY last stream %d %v; want SETTINGS then GOAWAY 0 NO_ERROR", types, g.LastStreamID, g.ErrCode)
	}
	client.Close()
	await(t, ended, "ServeConn")
}

// Shutdown sends GOAWAY to a connection with a stream open, lets that
// stream finish, serves no stream opened after it, then closes the
// connection and returns.
func TestShutdownLetsOpenStreamsFinish(t *testing.T) {
	var reached atomic.Int32
	arrived := make(chan struct{}, 2)
	release := make(chan struct{})
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "finished")
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	await(t, arrived, "the request")

	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- f.srv.Shutdown(ctx) }()
	g := rc.goAway()
	if g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 1 {
		t.Errorf("GOAWAY %v, last stream %d; want NO_ERROR, 1", g.ErrCode, g.LastStreamID)
	}
	rc.get(3, "/") // past the GOAWAY's last stream: not served
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) with a stream open", err)
	default:
	}
	close(release)
	if r := rc.response(1); r.status != 200 || string(r.body) != "finished" {
		t.Errorf("the open stream: status %d, body %q; want 200 finished", r.status, r.body)
	}
	if err := rc.waitClosed(); err != nil {
		t.Errorf("the connection stayed open after its last stream: %v", err)
	}
	if err := await(t, stopped, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("%d requests reached the backend, want 1", n)
	}
}

// A connection that Shutdown finds waiting for its client's preface has
// nothing to serve: once the preface arrives, relay still closes it
// within its linger time, though the client keeps it open, and Shutdown
// returns without waiting for its deadline.
func TestShutdownClosesAConnectionWhosePrefaceArrivesAfterIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := NewServer(core.New(core.Config{}), testBodyTime, testLimits(), nil)
	client, server, fr := handOver(t, ln, false)
	defer client.Close()
	rc := &readingConn{Conn: server, reading: make(chan struct{})}
	ended := make(chan struct{})
	go s.ServeConn(rc, func() { close(ended) })
	await(t, rc.reading, "relay reading the client's preface")
	const patience = 5 * goAwayLinger
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(ctx) }()
	sendPreface(client, fr)
	if types := readUntilGoAway(fr); len(types) == 0 || types[len(types)-1] != http2.FrameGoAway {
		t.Fatalf("frames %v, want a GOAWAY", types)
	}
	// The client neither closes nor sends anything more.
	select {
	case <-ended:
	case <-time.After(patience):
		t.Errorf("the connection was still open %v after its GOAWAY", patience)
	}
	if err := await(t, stopped, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// stuckWatch is relay's side of a client's connection; it reports, once,
// that a write of relay's could not complete for stuckAfter: the
// client's socket is full. The write then goes on waiting, as it would,
// for up to ioTimeout.
type stuckWatch struct {
	*net.TCPConn
	once  sync.Once
	stuck chan<- struct{}
}

const stuckAfter = 200 * time.Millisecond

func (c *stuckWatch) Write(p []byte) (int, error) {
	c.TCPConn.SetWriteDeadline(time.Now().Add(stuckAfter))
	n, err := c.TCPConn.Write(p)
	c.TCPConn.SetWriteDeadline(time.Time{})
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.once.Do(func() { c.stuck <- struct{}{} })
		var m int
		c.TCPConn.SetWriteDeadline(time.Now().Add(ioTimeout))
		m, err = c.TCPConn.Write(p[n:])
		c.TCPConn.SetWriteDeadline(time.Time{})
		n += m
	}
	return n, err
}

// Shutdown sends each connection its GOAWAY on its own: clients whose
// stream is stuck writing a large response they never read, with the
// write side of their connections held by it, must not hold up the
// GOAWAY of the idle clients, which get theirs at once, well before
// Shutdown's deadline.
func TestShutdownIsNotHeldUpByClientsThatReadNothing(t *testing.T) {
	const (
		stuck  = 3
		idle   = 12
		prompt = 2 * time.Second // for an idle client's GOAWAY
		bound  = 4 * prompt      // Shutdown's deadline
	)
	chunk := pattern(32 << 10)
	b := newBackend(t, "big", func(w http.ResponseWriter, r *http.Request) {
		for range 1 << 15 { // 1 GiB, far more than any socket holds
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	stuckConns := make(chan struct{}, stuck+idle)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{wrap: func(nc net.Conn) net.Conn {
		return &stuckWatch{TCPConn: nc.(*net.TCPConn), stuck: stuckConns}
	}}, b)

	var readers []*rawConn
	for range stuck {
		rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
		// A small buffer, which the kernel does not grow, fills sooner.
		rc.nc.(*net.TCPConn).SetReadBuffer(64 << 10)
		if err := rc.fr.WriteWindowUpdate(0, maxWindow-65535); err != nil {
			t.Fatal(err)
		}
		rc.get(1, "/")
		readers = append(readers, rc)
	}
	for range stuck {
		await(t, stuckConns, "a connection whose client reads nothing filling up")
	}
	var idlers []*rawConn
	for range idle {
		rc := dialRaw(t, f.addr)
		rc.sync() // relay serves the connection
		idlers = append(idlers, rc)
	}

	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- f.srv.Shutdown(ctx) }()
	for i, rc := range idlers {
		rc.nc.SetReadDeadline(start.Add(prompt))
		for {
			fr, err := rc.read()
			if err != nil {
				t.Errorf("idle client %d: no GOAWAY %v after Shutdown started: %v", i, time.Since(start).Round(time.Millisecond), err)
				break
			}
			if g, ok := fr.(*http2.GoAwayFrame); ok {
				if g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 0 {
					t.Errorf("idle client %d: GOAWAY %v, last stream %d; want NO_ERROR, 0", i, g.ErrCode, g.LastStreamID)
				}
				break
			}
		}
	}
	select {
	case err := <-stopped:
		t.Errorf("Shutdown returned (%v) with streams still open", err)
	default:
	}
	// The clients that read nothing go away: their streams fail, and
	// Shutdown is done.
	for _, rc := range readers {
		rc.nc.Close()
	}
	if err := await(t, stopped, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
