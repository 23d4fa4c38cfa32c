package core

import (
	"net/netip"
	"relay/internal/h1"
	"testing"
)

// sendRaw forwards the raw request head through c as a front door would.
func sendRaw(t *testing.T, c *Core, head, proto string) reply {
	t.Helper()
	var req h1.Request
	if err := h1.ParseRequest([]byte(head), &req); err != nil {
		t.Fatal(err)
	}
	d := &fakeDoor{}
	peer := c.NewPeer(netip.MustParseAddrPort("127.0.0.1:40000"), false)
	x := &Exchange{Req: &req, Door: d, Peer: &peer, Proto: proto}
	c.Forward(x)
	return reply{status: d.status, body: d.body.String(), backend: d.backend}
}

// An HTTP/1.0 request without Host gets the Host of the backend it goes
// to (prepare), and a retry on another backend that one's, not the Host
// of the backend tried first.
func TestRetryGivesHostlessRequestItsBackendsHost(t *testing.T) {
	bad := resetting(t)
	good := serving(t, "good", nil)
	c, _ := startPool(t, testPool(), bad.b, good.b)
	for i := 0; i < 4; i++ {
		r := sendRaw(t, c, "GET / HTTP/1.0\r\n\r\n", "HTTP/1.0")
		if r.status != 200 || r.backend != "good" {
			t.Fatalf("request %d: %d from %q", i, r.status, r.backend)
		}
		if host := good.last().Host; host != good.b.URL.Host {
			t.Errorf("request %d (bad hit %d times): backend good got Host %q, want its own %q", i, bad.hits.Load(), host, good.b.URL.Host)
		}
	}
}
