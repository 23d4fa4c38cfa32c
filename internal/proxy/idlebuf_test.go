package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"relay/internal/backend"
)

// TestIdleClientConnHoldsNoBuffer checks the wiring that lets an idle
// keep-alive client connection give its read buffer back: the h1 reader
// must see the socket under rawio.Conn, or 10,000 idle clients keep 40 MB of
// buffers.
func TestIdleClientConnHoldsNoBuffer(t *testing.T) {
	_, cc, client, server := openClientConn(t)
	io.WriteString(client, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
	server.SetReadDeadline(time.Now().Add(ioTimeout))
	if err := cc.br.ReadRequest(&cc.req); err != nil {
		t.Fatal(err)
	}
	if !cc.br.HoldsBuffer() {
		t.Fatal("the reader holds no buffer right after reading a request")
	}
	// Nothing more arrives: the read that finds nothing gives the buffer
	// back before it waits, here until the deadline.
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if err := cc.br.ReadRequest(&cc.req); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("reading an idle connection: %v, want the deadline", err)
	}
	if cc.br.HoldsBuffer() {
		t.Error("an idle client connection still holds its read buffer")
	}
}

// TestClosedClientConnGivesItsBufferBack checks that a connection the
// client closes hands its read buffer back to the shared pool, even with
// the start of an unfinished head in it: otherwise every client that hangs
// up takes a buffer with it, and the next connections each need a new one.
func TestClosedClientConnGivesItsBufferBack(t *testing.T) {
	p, cc, client, _ := openClientConn(t)
	p.srv.slots <- struct{}{} // as the accept loop takes one
	p.srv.track(cc)
	done := make(chan struct{})
	go func() { cc.run(); close(done) }()
	io.WriteString(client, "GET / HTTP/1.1\r\nHost: relay\r\n\r\nGET /unfinish")
	client.SetReadDeadline(time.Now().Add(ioTimeout))
	if _, err := http.ReadResponse(bufio.NewReader(client), nil); err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	client.Close()
	select {
	case <-done:
	case <-time.After(ioTimeout):
		t.Fatal("the connection did not end when the client closed it")
	}
	if cc.br.HoldsBuffer() {
		t.Error("a closed client connection still holds its read buffer")
	}
}

// openClientConn accepts a loopback connection as relay's client
// connection, ready for requests, over a proxy whose backend is dead; it
// returns the proxy, the connection, and the client's and relay's sockets.
func openClientConn(t *testing.T) (*Proxy, *clientConn, net.Conn, net.Conn) {
	t.Helper()
	p, err := build(withDefaults(Config{}), []*backend.Backend{newBackendFor(t, deadAddr(t), 1)})
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	cc := newClientConn(p, server, nil)
	cc.open(server)
	return p, cc, client, server
}
