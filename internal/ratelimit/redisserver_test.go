package ratelimit

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server of a test's own, on a port of 127.0.0.1,
// without persistence.
type redisServer struct {
	t    testing.TB
	path string
	port int
	addr string
	cmd  *exec.Cmd
}

// startRedis starts a redis-server for t on a free port and stops it when
// t ends. Without redis-server, t is skipped.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	s := redisAt(t, freeAddr(t))
	s.start()
	return s
}

// redisAt is a redis-server for t on addr, a port of 127.0.0.1, not yet
// started; it is stopped when t ends. Without redis-server, t is skipped.
func redisAt(t testing.TB, addr string) *redisServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed; .ci/run installs it (apt-get install redis-server)")
	}
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	s := &redisServer{t: t, path: path, port: port, addr: addr}
	t.Cleanup(s.stop)
	return s
}

// freeAddr is an address of 127.0.0.1 where nothing listens, for a
// server started later.
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start starts the server on its port, again after stop, and returns when
// it answers PING.
func (s *redisServer) start() {
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
			s.stop()
			s.t.Fatalf("redis-server on %s did not answer PING within 10s", s.addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills the server, as a crash would, and waits for it to exit.
func (s *redisServer) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

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

// client is a go-redis client of the test's own, to look at what the
// stores wrote.
func (s *redisServer) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: 2, DisableIdentity: true})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// scriptCalls returns the script runs the server has answered since the
// last CONFIG RESETSTAT: EVALSHA and EVAL calls.
func scriptCalls(t testing.TB, c *redis.Client) int {
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

// logLines is a slog handler that counts the messages logged.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (h *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *logLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logLines) WithGroup(string) slog.Handler            { return h }
func (h *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, b.String())
	h.mu.Unlock()
	return nil
}

// count returns the lines logged with message msg.
func (h *logLines) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if _, m, _ := strings.Cut(l, " "); strings.HasPrefix(m, msg) {
			n++
		}
	}
	return n
}

func (h *logLines) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.lines, "\n")
}

// eventually polls cond every 10ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}
