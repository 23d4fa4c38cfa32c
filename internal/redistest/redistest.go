// Package redistest runs a redis-server of a test's own, on a port of
// 127.0.0.1 and without persistence, for the tests of the Redis rate
// limit store (internal/ratelimit) and of relay instances sharing it.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server of a test's own, on a port of 127.0.0.1,
// without persistence.
type Server struct {
	t    testing.TB
	path string
	port int
	addr string
	cmd  *exec.Cmd
}

// Start starts a redis-server for t on a free port and stops it when
// t ends. Without redis-server, t is skipped.
func Start(t testing.TB) *Server {
	t.Helper()
	s := At(t, FreeAddr(t))
	s.Start()
	return s
}

// At is a redis-server for t on addr, a port of 127.0.0.1, not yet
// started; it is stopped when t ends. Without redis-server, t is skipped.
func At(t testing.TB, addr string) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed; .ci/run installs it (apt-get install redis-server)")
	}
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, path: path, port: port, addr: addr}
	t.Cleanup(s.Stop)
	return s
}

// FreeAddr is an address of 127.0.0.1 where nothing listens, for a
// server started later.
func FreeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start starts the server on its port, again after stop, and returns when
// it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.path, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pingRaw(s.addr) == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redis-server on %s did not answer PING within 10s", s.addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server, as a crash would, and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return s.addr }

// pingRaw sends PING on a connection of its own.
func pingRaw(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING: %q", line)
	}
	return nil
}

// Client is a go-redis client of the test's own, to look at what the
// stores wrote.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: 2, DisableIdentity: true})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// ScriptCalls returns the script runs the server has answered since the
// last CONFIG RESETSTAT: EVALSHA and EVAL calls.
func ScriptCalls(t testing.TB, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats: %q", line)
		}
		n += v
	}
	return n
}
