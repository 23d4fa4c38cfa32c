package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// TestH2BackendSeesTheHeadAsHTTP2Fields sends an HTTP/1.1 request whose
// field names come in every case, with the fields that end at the hop
// HTTP/1.1 gave them, to an HTTP/2 backend: the backend must see the names
// in lower case, Host as :authority, TE only as "trailers", and none of
// the hop's fields (RFC 9113 8.2).
func TestH2BackendSeesTheHeadAsHTTP2Fields(t *testing.T) {
	got := make(chan string, 1)
	be := startHostileH2(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		var b strings.Builder
		for _, f := range req.Fields {
			fmt.Fprintf(&b, "%s=%s\n", f.Name, f.Value)
		}
		got <- b.String()
		hc.Head(req.StreamID, true, ":status", "204")
	})
	r := startRelay(t, Config{Pool: core.PoolConfig{Protocol: core.H2C}}, be.b)
	c, _ := dialRelay(t, r)
	write(t, c, "GET /head HTTP/1.1\r\n"+
		"HOST: Example.test\r\n"+
		"X-Mixed-Case: One\r\n"+
		"x-lower: two\r\n"+
		"Connection: keep-alive, X-Hop\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"X-Hop: gone\r\n"+
		"TE: trailers, deflate\r\n"+
		"UPPER-SAME-LENGTH: x\r\n"+
		"Upgrades: not-a-hop\r\n"+
		"\r\n")
	var fields string
	select {
	case fields = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the backend got no request")
	}
	for _, want := range []string{"\n:method=GET\n", ":scheme=http\n", ":authority=Example.test\n", ":path=/head\n",
		"\nx-mixed-case=One\n", "\nx-lower=two\n", "\nupper-same-length=x\n", "\nupgrades=not-a-hop\n", "\nte=trailers\n"} {
		if !strings.Contains("\n"+fields, want) {
			t.Errorf("the backend's fields lack %q:\n%s", want, fields)
		}
	}
	for _, gone := range []string{"\nconnection=", "\nkeep-alive=", "\nproxy-connection=", "\nx-hop=", "\nhost=", "deflate"} {
		if strings.Contains("\n"+fields, gone) {
			t.Errorf("the backend's fields hold %q:\n%s", gone, fields)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(fields), "\n") {
		name, _, _ := strings.Cut(line, "=")
		if name != strings.ToLower(name) {
			t.Errorf("field name %q is not in lower case", name)
		}
	}
	if n := strings.Count("\n"+fields, "\nte="); n != 1 {
		t.Errorf("te came %d times:\n%s", n, fields)
	}
}
