// Package h2test runs HTTP/2 backends for tests, on loopback ports: a
// real one (golang.org/x/net/http2's server, over h2c) that counts its
// connections, and a hostile one written frame by frame, for answers no
// well-behaved server gives.
package h2test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Server is an h2c server on a loopback port.
type Server struct {
	// Addr is host:port, URL http://Addr.
	Addr, URL string
	// Accepted counts the connections the server accepted, Open those
	// still open.
	Accepted, Open atomic.Int64
}

// ServeH2C serves h with srv over h2c (prior knowledge) until the test
// ends, when the listener and every connection are closed.
func ServeH2C(t testing.TB, srv *http2.Server, h http.Handler) *Server {
	t.Helper()
	s := &Server{}
	serve(t, s, func(nc net.Conn) {
		s.Accepted.Add(1)
		s.Open.Add(1)
		defer s.Open.Add(-1)
		srv.ServeConn(nc, &http2.ServeConnOpts{Handler: h})
	})
	return s
}

// serve accepts connections on a loopback listener and runs each on a
// goroutine of its own, until the test ends.
func serve(t testing.TB, s *Server, conn func(net.Conn)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	s.URL = "http://" + s.Addr
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				conn(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// Hostile is an h2c backend written frame by frame.
type Hostile struct {
	Server
	// Heads counts the request heads read.
	Heads atomic.Int64
	// Resets receives the id of each stream relay resets (up to 1000
	// waiting; more are dropped).
	Resets chan uint32
}

// Conn is one connection of a Hostile backend.
type Conn struct {
	// NC is the connection, to close or cut.
	NC  net.Conn
	mu  sync.Mutex
	bw  *bufio.Writer
	fr  *http2.Framer
	buf []byte
}

// StartHostile starts a hostile backend: after the preface and SETTINGS,
// answer is called on the reading goroutine for each request head, and
// data, when not nil, for each DATA frame; both write whatever frames
// they like. Every connection is bounded by timeout.
func StartHostile(t testing.TB, timeout time.Duration, answer func(*Conn, *http2.MetaHeadersFrame), data func(*Conn, *http2.DataFrame)) *Hostile {
	t.Helper()
	h := &Hostile{Resets: make(chan uint32, 1000)}
	serve(t, &h.Server, func(nc net.Conn) {
		nc.SetDeadline(time.Now().Add(timeout))
		h.run(nc, answer, data)
	})
	return h
}

func (h *Hostile) run(nc net.Conn, answer func(*Conn, *http2.MetaHeadersFrame), data func(*Conn, *http2.DataFrame)) {
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, pre); err != nil || string(pre) != http2.ClientPreface {
		return
	}
	c := &Conn{NC: nc, bw: bufio.NewWriter(nc)}
	c.fr = http2.NewFramer(c.bw, nc)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.Write(func(fr *http2.Framer) { fr.WriteSettings() })
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.Write(func(fr *http2.Framer) { fr.WriteSettingsAck() })
			}
		case *http2.MetaHeadersFrame:
			h.Heads.Add(1)
			answer(c, f)
		case *http2.DataFrame:
			if data != nil {
				data(c, f)
			}
		case *http2.RSTStreamFrame:
			select {
			case h.Resets <- f.StreamID:
			default:
			}
		}
	}
}

// Write writes frames with fr and flushes them.
func (c *Conn) Write(fn func(fr *http2.Framer)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.fr)
	c.bw.Flush()
}

// Head sends a header block of name, value pairs on stream id, without
// the checks a well-behaved HPACK user would make.
func (c *Conn) Head(id uint32, end bool, fields ...string) {
	c.Write(func(fr *http2.Framer) {
		c.buf = c.buf[:0]
		e := hpack.NewEncoder(appender{&c.buf})
		for i := 0; i+1 < len(fields); i += 2 {
			e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.buf, EndStream: end, EndHeaders: true})
	})
}

// Data sends DATA on stream id.
func (c *Conn) Data(id uint32, end bool, p string) {
	c.Write(func(fr *http2.Framer) { fr.WriteData(id, end, []byte(p)) })
}

type appender struct{ b *[]byte }

func (w appender) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }
