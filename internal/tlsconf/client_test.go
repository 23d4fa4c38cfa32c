package tlsconf

import (
	"crypto/tls"
	"net"
	"net/url"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/testcert"
)

// TestH2OffersOnlyHTTP2: against a backend that speaks both, a backend's
// settings negotiate HTTP/1.1 and their H2 copy HTTP/2, resuming the
// session the first made; the settings themselves are left as they were.
func TestH2OffersOnlyHTTP2(t *testing.T) {
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "backend.test")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair.TLS}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				// A byte after the handshake: the client reads the
				// session ticket that comes before it.
				c.Write([]byte{1})
				c.Read(make([]byte, 1)) // until the client closes
			}()
		}
	}()
	u := &url.URL{Scheme: "https", Host: ln.Addr().String()}
	tc, err := Client(u, config.UpstreamTLS{CAFile: ca.File, ServerName: "backend.test"})
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(tc *tls.Config) tls.ConnectionState {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), tc)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return c.ConnectionState()
	}
	if got := handshake(tc).NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("the backend's settings negotiated %q, want http/1.1", got)
	}
	h2 := H2(tc)
	st := handshake(h2)
	if st.NegotiatedProtocol != "h2" {
		t.Errorf("H2's copy negotiated %q, want h2", st.NegotiatedProtocol)
	}
	if !st.DidResume {
		t.Errorf("H2's copy did not resume the session of the backend's settings")
	}
	if len(tc.NextProtos) != 1 || tc.NextProtos[0] != "http/1.1" {
		t.Errorf("H2 changed the backend's settings: NextProtos %q", tc.NextProtos)
	}
	if H2(nil) != nil {
		t.Errorf("H2 of an http backend's nil settings is not nil")
	}
}
