package admin

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"relay/internal/control"
	"relay/internal/supervisor"
)

// The admin listener holds at most MaxConns connections: one more waits
// in the kernel's backlog, unanswered, until one of them closes, so no
// client can make it take descriptors without bound.
func TestAdminConnectionsAreBounded(t *testing.T) {
	ctl := control.NewControl(supervisor.ConfigSource{Generation: 1}, nil, 50, slog.New(slog.DiscardHandler))
	s, err := Start("127.0.0.1:0", Options{Control: ctl, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	healthz := func(c net.Conn, wait time.Duration) error {
		c.SetDeadline(time.Now().Add(wait))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	for i := range MaxConns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if err := healthz(c, 5*time.Second); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := healthz(extra, 300*time.Millisecond); err == nil {
		t.Fatalf("connection %d was served beside %d open ones", MaxConns+1, MaxConns)
	}
	held[0].Close()
	again, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	// The waiting connection was accepted in the freed place; it still
	// holds its half-sent request, so a new one waits behind it: closing
	// the first waiting one frees the place for the next.
	extra.Close()
	if err := healthz(again, 5*time.Second); err != nil {
		t.Fatalf("once connections closed: %v", err)
	}
}
