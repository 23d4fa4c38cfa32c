package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
)

func TestSmoke(t *testing.T) {
	var bs []*backend.Backend
	for i := 0; i < 3; i++ {
		i := i
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "hello from %d %s %d xff=%s", i, r.URL.Path, n, r.Header.Get("X-Forwarded-For"))
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		b, _ := backend.New(u, 1)
		bs = append(bs, b)
	}
	p, err := New(Config{}, bs)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go p.Serve(ln)
	defer p.Shutdown(context.Background())
	c := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < 6; i++ {
		resp, err := c.Get("http://" + ln.Addr().String() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%d %s", resp.StatusCode, b)
	}
	resp, err := c.Post("http://"+ln.Addr().String()+"/p", "text/plain", strings.NewReader(strings.Repeat("a", 100000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	t.Logf("%d %s", resp.StatusCode, b)
}
