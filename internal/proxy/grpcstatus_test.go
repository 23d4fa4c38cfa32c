package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"relay/internal/logging"
	"relay/internal/stats"
)

// TestGRPCStatusLoggedAndCounted: a gRPC call's grpc-status, from the
// backend's head (a trailers-only answer) or from its chunked body's
// trailers, or relay's own when no backend can take the call, is in the
// call's access line and counted by status, on the backend that answered
// or on the pool's unanswered requests; a request that is not gRPC has
// neither.
func TestGRPCStatusLoggedAndCounted(t *testing.T) {
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			var answer string
			switch req.Target {
			case "/shop.Items/Find":
				answer = "HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\nGrpc-Status: 5\r\nGrpc-Message: no such item\r\nContent-Length: 0\r\n\r\n"
			case "/shop.Items/Get":
				answer = "HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\nTransfer-Encoding: chunked\r\nTrailer: grpc-status\r\n\r\n" +
					"7\r\n\x00\x00\x00\x00\x02\x08\x01\r\n0\r\ngrpc-status: 0\r\n\r\n"
			default:
				answer = okResponse("plain")
			}
			if _, err := c.Write([]byte(answer)); err != nil {
				return
			}
		}
	})
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf, logging.WithFlushInterval(time.Millisecond))
	r := startRelay(t, Config{AccessLog: log}, rb.b)

	c, br := dialRelay(t, r)
	call := func(method string) (status int, grpcStatus string) {
		t.Helper()
		write(t, c, "POST /shop.Items/"+method+" HTTP/1.1\r\nHost: shop.test\r\nContent-Type: application/grpc\r\nTE: trailers\r\n"+
			"Content-Length: 5\r\n\r\n\x00\x00\x00\x00\x00")
		resp, _ := readResponse(t, br, "POST")
		if v := resp.Header.Get("Grpc-Status"); v != "" {
			return resp.StatusCode, v
		}
		return resp.StatusCode, resp.Trailer.Get("Grpc-Status")
	}
	if code, gs := call("Find"); code != 200 || gs != "5" {
		t.Errorf("Find: %d with grpc-status %q, want 200 and 5", code, gs)
	}
	if code, gs := call("Get"); code != 200 || gs != "0" {
		t.Errorf("Get: %d with grpc-status %q, want 200 and 0", code, gs)
	}
	write(t, c, "GET /plain HTTP/1.1\r\nHost: shop.test\r\n\r\n")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "plain" {
		t.Errorf("GET /plain: %d %q", resp.StatusCode, body)
	}
	rb.b.SetDisabled(true)
	if code, gs := call("Get"); code != 200 || gs != "14" {
		t.Errorf("Get with no backend: %d with grpc-status %q, want relay's 200 and 14 UNAVAILABLE", code, gs)
	}

	// Counted by the time the connection is shut: lines and counters
	// are written once the answer is out.
	if err := r.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Path       string  `json:"path"`
		Status     int     `json:"status"`
		Backend    string  `json:"backend"`
		GRPCStatus *string `json:"grpc_status"`
	}
	text := strings.TrimSuffix(buf.String(), "\n")
	var got []string
	for _, raw := range strings.Split(text, "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, raw)
		}
		gs := "absent"
		if l.GRPCStatus != nil {
			gs = *l.GRPCStatus
		}
		backend := "none"
		if l.Backend == rb.b.Name {
			backend = "backend"
		}
		got = append(got, l.Path+" "+backend+" grpc_status="+gs)
	}
	want := []string{
		"/shop.Items/Find backend grpc_status=5",
		"/shop.Items/Get backend grpc_status=0",
		"/plain backend grpc_status=absent",
		"/shop.Items/Get none grpc_status=14",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("access lines:\n%s\nwant:\n%s\nas written:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), text)
	}

	st := r.p.Stats()
	var answered, own [stats.NumGRPC]uint64
	for _, b := range st.Backends {
		for i, n := range b.Requests.GRPC {
			answered[i] += n
		}
	}
	for _, p := range st.Pools {
		for i, n := range p.Unanswered.GRPC {
			own[i] += n
		}
	}
	if want := [stats.NumGRPC]uint64{0: 1, 5: 1}; answered != want {
		t.Errorf("the backend's gRPC counts %v, want one OK and one NOT_FOUND", answered)
	}
	if want := [stats.NumGRPC]uint64{14: 1}; own != want {
		t.Errorf("the pool's unanswered gRPC counts %v, want one UNAVAILABLE", own)
	}
}
