package h2

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// hostileBackend is an h2c backend written frame by frame, for answers
// no well-behaved HTTP/2 server gives: answer is called on the reading
// goroutine for each request head, and writes what frames it likes.
type hostileBackend struct {
	url string
	// resets receives the id of each stream relay resets.
	resets chan uint32
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// hostileConn is one connection of a hostileBackend.
type hostileConn struct {
	bw  *bufio.Writer
	fr  *http2.Framer
	wmu sync.Mutex
}

func startHostileBackend(t *testing.T, answer func(hc *hostileConn, req *http2.MetaHeadersFrame)) *hostileBackend {
	t.Helper()
	return startHostileBackendData(t, answer, nil)
}

// startHostileBackendData is startHostileBackend with data called for
// each DATA frame relay sends.
func startHostileBackendData(t *testing.T, answer func(hc *hostileConn, req *http2.MetaHeadersFrame), data func(hc *hostileConn, f *http2.DataFrame)) *hostileBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileBackend{url: "http://" + ln.Addr().String(), resets: make(chan uint32, 1000), conns: make(map[net.Conn]struct{})}
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
				h.serve(nc, answer, data)
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

func (h *hostileBackend) serve(nc net.Conn, answer func(*hostileConn, *http2.MetaHeadersFrame), data func(*hostileConn, *http2.DataFrame)) {
	nc.SetDeadline(time.Now().Add(ioTimeout))
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, pre); err != nil || string(pre) != http2.ClientPreface {
		return
	}
	hc := &hostileConn{bw: bufio.NewWriter(nc)}
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
			answer(hc, f)
		case *http2.DataFrame:
			if data != nil {
				data(hc, f)
			}
		case *http2.RSTStreamFrame:
			select {
			case h.resets <- f.StreamID:
			default:
			}
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

// head sends a header block of name, value pairs on stream id.
func (hc *hostileConn) head(id uint32, end bool, fields ...string) {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	hc.write(func() {
		hc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b.Bytes(), EndStream: end, EndHeaders: true})
	})
}

// data sends DATA on stream id.
func (hc *hostileConn) data(id uint32, end bool, p string) {
	hc.write(func() { hc.fr.WriteData(id, end, []byte(p)) })
}
