package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCheckWarnsOfHashKeyUnused: relay -check accepts hash_key under an
// algorithm that does not hash, exits 0, and says so at its line; under
// ip-hash it has nothing to say.
func TestCheckWarnsOfHashKeyUnused(t *testing.T) {
	t.Parallel()
	backends := "backends:\n  - url: http://127.0.0.1:8001\n"
	path := writeFile(t, t.TempDir(), "relay.yml", "hash_key: header:X-User\n"+backends)
	code, stdout, stderr := runRelay(t, "-check", "-config", path)
	if code != 0 || !strings.HasSuffix(stdout, "1 warning\n") {
		t.Fatalf("exit %d, stdout %q; want 0 and one warning; stderr:\n%s", code, stdout, stderr)
	}
	want := path + ":1: warning: hash_key: hash_key is set, but algorithm round-robin does not hash, so it has no effect; it applies to ip-hash"
	if strings.TrimSpace(stderr) != want {
		t.Errorf("stderr:\n%s\nwant\n%s", stderr, want)
	}
	path = writeFile(t, t.TempDir(), "relay.yml", "algorithm: ip-hash\nhash_key: header:X-User\nhash_balance_factor: 125\n"+backends)
	code, stdout, stderr = runRelay(t, "-check", "-config", path)
	if code != 0 || strings.TrimSpace(stderr) != "" || !strings.HasSuffix(stdout, "ok (1 backends, ip-hash)\n") {
		t.Errorf("ip-hash: exit %d, stdout %q, stderr %q; want 0, ok and no warning", code, stdout, stderr)
	}
}

// TestHashKeyAcrossProcesses: with hash_key: header:X-User the same
// value reaches the same backend on every connection, whichever serving
// process accepts it, and different values spread.
func TestHashKeyAcrossProcesses(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 4)
		r, _ := startRelay(t, "", "-config", writeConfig(t, fmt.Sprintf(
			"processes: %d\nalgorithm: ip-hash\nhash_key: header:X-User\n", processes)+backendsYAML(urlsOf(bs))))
		spread := map[string]int{}
		for v := range 16 {
			first := ""
			for range 6 {
				got := getWithHeader(t, r.addr, "X-User", fmt.Sprintf("user-%d", v))
				if first == "" {
					first = got
				} else if got != first {
					t.Fatalf("user-%d reached %q, then %q", v, first, got)
				}
			}
			spread[first]++
		}
		if len(spread) < 3 {
			t.Errorf("16 users reached only %d of 4 backends: %v", len(spread), spread)
		}
		r.stop()
	})
}

// getWithHeader sends GET / with name: value on a new connection and
// returns the body.
func getWithHeader(t *testing.T, addr, name, value string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: relay\r\n%s: %s\r\nConnection: close\r\n\r\n", name, value)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET / with %s: %s: %v", name, value, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET / with %s: %s: status %d, %v", name, value, resp.StatusCode, err)
	}
	return string(body)
}
