package rawio

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/testcert"
)

// countingConn counts the writes that reach the connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func batchPair(t *testing.T) (*BatchConn, *countingConn, net.Conn) {
	t.Helper()
	s, peer := tcpPair(t)
	cc := &countingConn{Conn: s}
	b := NewBatchConn(cc)
	s.SetDeadline(time.Now().Add(ioTimeout))
	peer.SetDeadline(time.Now().Add(ioTimeout))
	return b, cc, peer
}

// stalledBatch is a batching BatchConn over a socket whose peer reads
// nothing: no deadline but WriteWait bounds a write the peer stalls.
func stalledBatch(t *testing.T, wait time.Duration) (*BatchConn, *Conn) {
	t.Helper()
	b, cc, _ := batchPair(t)
	s := cc.Conn.(*Conn)
	s.SetDeadline(time.Time{})
	s.WriteWait = wait
	b.Batch()
	return b, s
}

// TestBatchConnGathersWrites checks that writes made one after another
// while the drain has not yet run leave in one write, whole and in order.
func TestBatchConnGathersWrites(t *testing.T) {
	// One scheduler thread: the drain cannot run beside the writer.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	b, cc, peer := batchPair(t)
	b.Batch()
	var want bytes.Buffer
	for i := 0; i < 100; i++ {
		p := []byte("frame " + strconv.Itoa(i) + ";")
		want.Write(p)
		if n, err := b.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
	}
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the peer read %q, want %q", got, want.Bytes())
	}
	if n := cc.writes.Load(); n > 2 {
		t.Errorf("100 writes reached the socket in %d writes, want them gathered into one or two", n)
	}
}

// TestBatchConnWritesThroughBeforeBatch checks that until Batch every
// Write is the connection's own (a TLS handshake, HTTP/1.1).
func TestBatchConnWritesThroughBeforeBatch(t *testing.T) {
	b, cc, peer := batchPair(t)
	for i := 0; i < 3; i++ {
		if _, err := b.Write([]byte("abc")); err != nil {
			t.Fatal(err)
		}
	}
	if n := cc.writes.Load(); n != 3 {
		t.Errorf("3 writes before Batch made %d on the socket", n)
	}
	got := make([]byte, 9)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "abcabcabc" {
		t.Fatalf("peer read %q, %v", got, err)
	}
}

// TestBatchConnCloseWritesWhatIsPending checks that Close sends what was
// written before it, as a server's last GOAWAY must be, and then closes.
func TestBatchConnCloseWritesWhatIsPending(t *testing.T) {
	b, _, peer := batchPair(t)
	b.Batch()
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, more than the socket takes at once
	read := make(chan []byte, 1)
	go func() {
		got, _ := io.ReadAll(peer)
		read <- got
	}()
	for p := want; len(p) > 0; p = p[4096:] {
		if _, err := b.Write(p[:4096]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-read; !bytes.Equal(got, want) {
		t.Fatalf("the peer read %d bytes before the end, want the %d written", len(got), len(want))
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Close: %v, want net.ErrClosed", err)
	}
}

// TestBatchConnBoundsWhatItHolds checks that a peer that stops reading
// makes writers wait once batchLimit bytes are pending, instead of relay
// holding whatever it is given, and that the connection's WriteWait then
// fails the stalled write and the waiting writer, even though callers set
// and clear write deadlines around their writes as Go's HTTP/2 server
// does.
func TestBatchConnBoundsWhatItHolds(t *testing.T) {
	b, s := stalledBatch(t, 300*time.Millisecond)
	chunk := make([]byte, 16<<10)
	failed := make(chan error, 1)
	go func() {
		for {
			b.SetWriteDeadline(time.Now().Add(time.Hour))
			_, err := b.Write(chunk)
			b.SetWriteDeadline(time.Time{})
			if err != nil {
				failed <- err
				return
			}
		}
	}()
	most := 0
	deadline := time.After(ioTimeout)
	for {
		b.mu.Lock()
		most = max(most, b.pendingBytes())
		b.mu.Unlock()
		select {
		case err := <-failed:
			if !isTimeout(err) {
				t.Errorf("the waiting writer failed with %v, want WriteWait's timeout", err)
			}
			if most > batchLimit+len(chunk) {
				t.Errorf("%d bytes were pending, want at most %d", most, batchLimit+len(chunk))
			}
			if _, err := b.Write([]byte("x")); err == nil {
				t.Error("a write after a failed one succeeded")
			}
			return
		case <-deadline:
			t.Fatalf("writing to a peer that reads nothing has not failed after %v (WriteWait %v)", ioTimeout, s.WriteWait)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestBatchConnCloseEndsAStalledWrite checks that Close returns when the
// client stalls the pending bytes, instead of holding the connection (and
// its slot) for as long as the client likes, and that it wakes writers
// waiting for room.
func TestBatchConnCloseEndsAStalledWrite(t *testing.T) {
	b, _ := stalledBatch(t, 200*time.Millisecond)
	if _, err := b.Write(make([]byte, 8<<20)); err != nil { // more than the socket takes
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the drain's write waits, WriteWait armed
	// Go's HTTP/2 server sets a write deadline around each write and
	// clears it after: that must not clear the drain's.
	b.SetWriteDeadline(time.Now().Add(time.Hour))
	if _, err := b.Write([]byte("PING")); err != nil {
		t.Fatal(err)
	}
	b.SetWriteDeadline(time.Time{})
	waiting := make(chan error, 1)
	go func() {
		_, err := b.Write([]byte("more")) // waits for room
		waiting <- err
	}()
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- b.Close() }()
	select {
	case <-closed:
	case <-time.After(closeWait + time.Second):
		t.Fatalf("Close still waiting after %v", time.Since(start))
	}
	select {
	case <-waiting:
	case <-time.After(ioTimeout):
		t.Fatal("a writer waiting for room was not woken by Close")
	}
}

// TestBatchConnCloseReportsLostBytes checks that Close says so when bytes
// a Write accepted never reached the client.
func TestBatchConnCloseReportsLostBytes(t *testing.T) {
	b, _ := stalledBatch(t, 200*time.Millisecond)
	if _, err := b.Write(make([]byte, 8<<20)); err != nil { // the peer reads nothing
		t.Fatal(err)
	}
	if err := b.Close(); !isTimeout(err) {
		t.Errorf("Close with 8 MiB the peer never took: %v, want WriteWait's timeout", err)
	}
}

// TestBatchConnWriteDeadlineBoundsTheWaitForRoom checks that a caller's
// write deadline, kept off the socket, still bounds its Write: a wait for
// room ends at the deadline, and a Write after it fails at once.
func TestBatchConnWriteDeadlineBoundsTheWaitForRoom(t *testing.T) {
	b, s := stalledBatch(t, 0) // the drain's write stalls for good
	if _, err := b.Write(make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	// Once the drain has taken those bytes (and stalled on them), a full
	// batch behind them makes the next Write wait for room.
	for taken := false; !taken; {
		b.mu.Lock()
		taken = b.pendingBytes() == 0
		b.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Write(make([]byte, batchLimit)); err != nil {
		t.Fatal(err)
	}
	b.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	start := time.Now()
	_, err := b.Write([]byte("close_notify"))
	if took := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || took > 5*time.Second {
		t.Fatalf("a Write waiting for room past its deadline returned %v after %v, want the deadline after 200ms", err, took)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a Write after its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	b.SetWriteDeadline(time.Time{})
	s.Close() // ends the stalled drain; Close below does not wait
}

// TestBatchConnWriteAfterDeadlineFails checks that a deadline that
// passes while no Write waits still fails the next one, though it would
// find room, and that a deadline moved later or cleared lets them
// through again.
func TestBatchConnWriteAfterDeadlineFails(t *testing.T) {
	b, _, peer := batchPair(t)
	b.Batch()
	b.SetWriteDeadline(time.Now().Add(-time.Second))
	if _, err := b.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a Write past a deadline set in the past: %v, want os.ErrDeadlineExceeded", err)
	}
	b.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := b.Write([]byte("a")); err != nil {
		t.Fatalf("a Write before its deadline: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := b.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a Write after its deadline passed: %v, want os.ErrDeadlineExceeded", err)
	}
	// A deadline moved later before the old one passes holds.
	b.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	b.SetWriteDeadline(time.Now().Add(time.Hour))
	time.Sleep(100 * time.Millisecond)
	if _, err := b.Write([]byte("b")); err != nil {
		t.Fatalf("a Write before its moved deadline: %v", err)
	}
	b.SetWriteDeadline(time.Time{})
	if _, err := b.Write([]byte("c")); err != nil {
		t.Fatalf("a Write with the deadline cleared: %v", err)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "abc" {
		t.Fatalf("the peer read %q, %v; want the three Writes taken, in order", got, err)
	}
	b.Close()
}

// tlsPeers are a server certificate and the pool that trusts it, for
// tests of a BatchConn under crypto/tls.
type tlsPeers struct {
	cert tls.Certificate
	pool *x509.CertPool
}

func newTLSPeers(t *testing.T) tlsPeers {
	t.Helper()
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "relay.test")
	cert, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return tlsPeers{cert, ca.Pool}
}

// handshake runs TLS over under (relay's side) and peer (the client's).
func (tp tlsPeers) handshake(t *testing.T, under, peer net.Conn) (srv, cli *tls.Conn) {
	t.Helper()
	srv = tls.Server(under, &tls.Config{Certificates: []tls.Certificate{tp.cert}})
	cli = tls.Client(peer, &tls.Config{RootCAs: tp.pool, ServerName: "relay.test"})
	hs := make(chan error, 1)
	go func() { hs <- cli.Handshake() }()
	if err := srv.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-hs; err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// TestBatchConnUnderTLSCloseSendsWhatIsPending checks the order crypto/tls
// closes in: close_notify written, the write deadline set to now, the
// connection closed. The bytes written before, and the alert, must reach
// the client.
func TestBatchConnUnderTLSCloseSendsWhatIsPending(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	tp := newTLSPeers(t)
	s, peer := tcpPair(t)
	s.WriteWait = time.Second
	b := NewBatchConn(s)
	srv, cli := tp.handshake(t, b, peer)
	b.Batch()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		cli.SetReadDeadline(time.Now().Add(ioTimeout))
		d, err := io.ReadAll(cli) // io.EOF, which ReadAll reports as nil, only after close_notify
		got <- result{d, err}
	}()
	const want = "the last response bytes and a GOAWAY"
	if _, err := srv.Write([]byte(want)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("closing: %v", err)
	}
	if r := <-got; string(r.b) != want || r.err != nil {
		t.Fatalf("the client read %q (%v), want %q and close_notify", r.b, r.err, want)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestBatchConnFailedDrainClosesTheConnection checks that a drain whose
// write fails (WriteWait: the peer took nothing) closes the connection,
// so that its reader learns at once that it is gone. A writer that has
// nothing more to send would otherwise never hear of the failure, and
// the connection would look alive until the next Write.
func TestBatchConnFailedDrainClosesTheConnection(t *testing.T) {
	b, _ := stalledBatch(t, 200*time.Millisecond)
	if _, err := b.Write(make([]byte, 8<<20)); err != nil { // more than the socket takes
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(ioTimeout))
	start := time.Now()
	_, err := b.Read(make([]byte, 1))
	if err == nil || isTimeout(err) {
		t.Fatalf("reading after the drain failed returned %v after %v, want the connection closed", err, time.Since(start))
	}
	if _, werr := b.Write([]byte("x")); !isTimeout(werr) {
		t.Errorf("a write after the failed drain returned %v, want its timeout", werr)
	}
}
