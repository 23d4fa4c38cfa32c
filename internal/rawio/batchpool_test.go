package rawio

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// patternByte is byte i of what connection k writes: no two connections
// write the same bytes at the same offset, and bytes shifted within one
// connection's stream do not match either.
func patternByte(k, i int) byte { return byte(k*131) ^ byte(i) ^ byte(i>>8)*29 ^ byte(i>>16)*7 }

// TestBatchConnsShareBuffersSafely runs many batching connections at
// once, some under TLS, each writing its own pattern in writes of many
// sizes (some larger than a kept buffer) and then closing, while their
// peers read: every byte must reach the right peer, in order, whole.
// The connections' batch buffers come from one pool, so a buffer given
// back while still written, or still held by the connection that gave
// it, would put one connection's bytes on another.
func TestBatchConnsShareBuffersSafely(t *testing.T) {
	tp := newTLSPeers(t)
	const conns, total = 16, 1 << 20
	sizes := []int{1, 7, 100, 1500, 4 << 10, 9000, 16 << 10, 40 << 10, 300 << 10}
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for k := range conns {
		s, peer := tcpPair(t)
		s.SetDeadline(time.Now().Add(ioTimeout))
		peer.SetDeadline(time.Now().Add(ioTimeout))
		b := NewBatchConn(s)
		var w io.WriteCloser = b
		var r io.Reader = peer
		useTLS := k%2 == 1
		if useTLS {
			w, r = tp.handshake(t, b, peer)
		}
		b.Batch()
		wg.Add(2)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 300<<10)
			for off, i := 0, k; off < total; i++ {
				n := min(sizes[i%len(sizes)], total-off)
				buf = buf[:n]
				for j := range buf {
					buf[j] = patternByte(k, off+j)
				}
				if _, err := w.Write(buf); err != nil {
					errs <- fmt.Errorf("connection %d: write at %d: %v", k, off, err)
					w.Close()
					return
				}
				// The caller's buffer is its own again once Write
				// returns: overwrite it, as a reused frame buffer is.
				for j := range buf {
					buf[j] = '#'
				}
				off += n
			}
			if err := w.Close(); err != nil {
				errs <- fmt.Errorf("connection %d: close: %v", k, err)
			}
		}()
		go func() {
			defer wg.Done()
			got := make([]byte, 64<<10)
			off := 0
			for {
				n, err := r.Read(got)
				for j, c := range got[:n] {
					if want := patternByte(k, off+j); c != want {
						errs <- fmt.Errorf("connection %d: byte %d is %#x, want %#x", k, off+j, c, want)
						return
					}
				}
				off += n
				if err == io.EOF {
					if off != total {
						errs <- fmt.Errorf("connection %d: the peer read %d bytes, want %d", k, off, total)
					}
					return
				}
				if err != nil {
					errs <- fmt.Errorf("connection %d: read at %d: %v", k, off, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
