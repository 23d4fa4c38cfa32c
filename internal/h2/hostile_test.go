package h2

import (
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/h2test"
)

// hostileConn is one connection of a hostile backend (h2test.Hostile):
// an h2c backend written frame by frame, for answers no well-behaved
// HTTP/2 server gives.
type hostileConn = h2test.Conn

// startHostileBackend starts a hostile backend whose answer is called for
// each request head.
func startHostileBackend(t *testing.T, answer func(hc *hostileConn, req *http2.MetaHeadersFrame)) *h2test.Hostile {
	t.Helper()
	return h2test.StartHostile(t, ioTimeout, answer, nil)
}

// startHostileBackendData is startHostileBackend with data called for
// each DATA frame relay sends.
func startHostileBackendData(t *testing.T, answer func(hc *hostileConn, req *http2.MetaHeadersFrame), data func(hc *hostileConn, f *http2.DataFrame)) *h2test.Hostile {
	t.Helper()
	return h2test.StartHostile(t, ioTimeout, answer, data)
}
