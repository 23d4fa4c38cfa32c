package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
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
// holding whatever it is given, and that the write deadline underneath
// then fails the waiting writer.
func TestBatchConnBoundsWhatItHolds(t *testing.T) {
	b, _, _ := batchPair(t)
	b.Batch()
	chunk := make([]byte, 16<<10)
	var accepted atomic.Int64
	failed := make(chan error, 1)
	go func() {
		for {
			if _, err := b.Write(chunk); err != nil {
				failed <- err
				return
			}
			accepted.Add(int64(len(chunk)))
		}
	}()
	// Wait until the writer stops making progress: the socket buffers
	// and the batch are full.
	last := int64(-1)
	for i := 0; ; i++ {
		time.Sleep(100 * time.Millisecond)
		n := accepted.Load()
		if n == last {
			break
		}
		if i == 30 {
			t.Fatalf("the writer never stopped: %d bytes accepted from a peer that reads nothing", n)
		}
		last = n
	}
	b.mu.Lock()
	pending := len(b.pending)
	b.mu.Unlock()
	if pending > batchLimit+len(chunk) {
		t.Errorf("%d bytes pending, want at most %d", pending, batchLimit+len(chunk))
	}
	b.SetWriteDeadline(time.Now())
	select {
	case err := <-failed:
		if !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
			t.Errorf("the waiting writer failed with %v, want the deadline", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("the waiting writer did not fail after the write deadline passed")
	}
	if _, err := b.Write([]byte("x")); err == nil {
		t.Error("a write after a failed one succeeded")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
