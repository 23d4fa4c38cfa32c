package health

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The probe benchmarks talk to a minimal HTTP server in a child process (this
// test binary, run as TestProbeServerProcess), so that ns/op, allocs/op and
// cpu-ns/op (process CPU from getrusage) count the probe alone, not the
// server's accepts and writes. RELAY_HEALTH_BENCH_ADDR=host:port probes a
// server of your own instead.
//
//	go test -run '^$' -bench Probe -benchtime 5000x ./internal/health/

func BenchmarkHTTPProbe(b *testing.B) {
	addr := startProbeServer(b)
	for _, keep := range []bool{false, true} {
		name := map[bool]string{false: "new-connection", true: "kept-connection"}[keep]
		b.Run(name, func(b *testing.B) {
			h := newHTTPCheck(newBackend(b, "http://"+addr), "/health", keep, newReadBufs())
			defer h.closeIdle()
			benchmarkProbe(b, h.probe)
		})
	}
}

func BenchmarkTCPProbe(b *testing.B) {
	be := newBackend(b, "http://"+startProbeServer(b))
	benchmarkProbe(b, func(ctx context.Context) error { return tcpProbe(ctx, be) })
}

// benchmarkProbe runs probe as Checker.check does, under a fresh timeout.
func benchmarkProbe(b *testing.B, probe func(context.Context) error) {
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := probe(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// startProbeServer runs the test binary as a probe server and returns its
// address. The server stops when its standard input closes.
func startProbeServer(tb testing.TB) string {
	tb.Helper()
	if addr := os.Getenv("RELAY_HEALTH_BENCH_ADDR"); addr != "" {
		return addr
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestProbeServerProcess$")
	cmd.Env = append(os.Environ(), "RELAY_HEALTH_PROBE_SERVER=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("probe server did not say its address: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	return strings.TrimSpace(line)
}

// TestProbeServerProcess is the probe server of the benchmarks; it does
// nothing unless run by startProbeServer. It answers every request with a
// small 200, as a health endpoint does, and closes the connection when the
// request asks it to.
func TestProbeServerProcess(t *testing.T) {
	if os.Getenv("RELAY_HEALTH_PROBE_SERVER") != "1" {
		t.Skip("run by the probe benchmarks")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	const (
		head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
		kept = head + "\r\nok\n"
		last = head + "Connection: close\r\n\r\nok\n"
	)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			for {
				req := readHead(c) // probes send one request at a time
				if req == nil {
					return
				}
				if bytes.Contains(req, []byte("\r\nConnection: close\r\n")) {
					c.Write([]byte(last))
					return
				}
				c.Write([]byte(kept))
			}
		}()
	}
}
