package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
)

// hostileH2 is an h2c backend written frame by frame, for answers no
// well-behaved HTTP/2 server gives: answer is called for each request
// head, and writes whatever frames it likes with the hostileConn.
type hostileH2 struct {
	b     *backend.Backend
	heads atomic.Int64 // request heads read
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// hostileConn is one connection of a hostileH2.
type hostileConn struct {
	nc  net.Conn
	bw  *bufio.Writer
	fr  *http2.Framer
	wmu sync.Mutex
}

func startHostileH2(t *testing.T, answer func(hc *hostileConn, req *http2.MetaHeadersFrame)) *hostileH2 {
	t.Helper()
	ln := listen(t)
	h := &hostileH2{conns: make(map[net.Conn]struct{})}
	h.b = newBackendFor(t, ln.Addr().String(), 1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns[nc] = struct{}{}
			h.mu.Unlock()
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				defer nc.Close()
				h.serve(nc, answer)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for nc := range h.conns {
			nc.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
	})
	return h
}

func (h *hostileH2) serve(nc net.Conn, answer func(*hostileConn, *http2.MetaHeadersFrame)) {
	nc.SetDeadline(time.Now().Add(ioTimeout))
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, pre); err != nil || string(pre) != http2.ClientPreface {
		return
	}
	hc := &hostileConn{nc: nc, bw: bufio.NewWriter(nc)}
	hc.fr = http2.NewFramer(hc.bw, nc)
	hc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	hc.write(func() { hc.fr.WriteSettings() })
	for {
		f, err := hc.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				hc.write(func() { hc.fr.WriteSettingsAck() })
			}
		case *http2.MetaHeadersFrame:
			h.heads.Add(1)
			answer(hc, f)
		}
	}
}

// write writes frames and flushes them.
func (hc *hostileConn) write(fn func()) {
	hc.wmu.Lock()
	defer hc.wmu.Unlock()
	fn()
	hc.bw.Flush()
}

// head sends a header block of name, value pairs on stream id, without
// the checks an HPACK user would make.
func (hc *hostileConn) head(id uint32, end bool, fields ...string) {
	var b []byte
	e := hpack.NewEncoder(sliceWriter{&b})
	for i := 0; i+1 < len(fields); i += 2 {
		e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	hc.write(func() {
		hc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: end, EndHeaders: true})
	})
}

// data sends DATA on stream id.
func (hc *hostileConn) data(id uint32, end bool, p string) {
	hc.write(func() { hc.fr.WriteData(id, end, []byte(p)) })
}

type sliceWriter struct{ b *[]byte }

func (w sliceWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// readUntilClosed reads what relay sends on c until it closes the
// connection or within seconds nothing more comes.
func readUntilClosed(c net.Conn, within time.Duration) (got string, closed bool) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(within))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			var ne net.Error
			return string(out), !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}
