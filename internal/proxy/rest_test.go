package proxy

import (
	"bufio"
	"net"
	"runtime"
	"testing"
	"time"
)

// TestRestingConnectionKeepsItsIdleTimeout checks that moving an idle
// connection's wait to a fresh goroutine changes nothing a client sees: the
// rested connection serves its next request, and the idle timeout still
// counts from the end of the last response, not from the move.
func TestRestingConnectionKeepsItsIdleTimeout(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	const idle, rest = time.Second, 700 * time.Millisecond
	r := startRelay(t, Config{IdleTimeout: idle, restAfter: rest}, backendsOf(hb)...)
	c, br := dialRelay(t, r)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	write(t, c, "GET /first HTTP/1.1\r\nHost: relay\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	time.Sleep(rest + 200*time.Millisecond) // rested by now
	write(t, c, "GET /after-rest HTTP/1.1\r\nHost: relay\r\n\r\n")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "a" {
		t.Fatalf("request on a rested connection: %d %q", resp.StatusCode, body)
	}
	idleFrom := time.Now()
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read %d bytes (%v) from an idle connection, want its end", n, err)
	}
	// Closed at idle after the response; counted from the rest it would be
	// idle+rest.
	if took := time.Since(idleFrom); took < idle-50*time.Millisecond || took >= idle+rest/2 {
		t.Errorf("idle connection closed after %v, want about %v", took, idle)
	}
}

// TestRestingConnectionsHoldSmallStacks checks what resting is for: idle
// connections wait on goroutines with fresh stacks, not on the ones that
// served them and grew theirs, and let their head buffers go.
func TestRestingConnectionsHoldSmallStacks(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	const rest = 3 * time.Second
	r := startRelay(t, Config{IdleTimeout: time.Minute, restAfter: rest}, backendsOf(hb)...)
	type mem struct{ stack, heap int64 }
	measure := func() mem {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return mem{int64(ms.StackInuse), int64(ms.HeapAlloc)}
	}
	const n = 500
	before := measure()
	conns := make([]net.Conn, 0, n)
	readers := make([]*bufio.Reader, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		c, br := dialRelay(t, r)
		write(t, c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
		conns = append(conns, c)
		readers = append(readers, br)
	}
	serving := measure()
	if time.Since(start) > rest*2/3 {
		t.Skipf("opening %d connections took %v, too close to the rest at %v to measure before it", n, time.Since(start), rest)
	}
	time.Sleep(rest + 500*time.Millisecond)
	rested := measure()
	perServing := (serving.stack - before.stack) / n
	perRested := (rested.stack - before.stack) / n
	t.Logf("stack per idle connection: %d bytes on the goroutine that served, %d rested", perServing, perRested)
	if perRested*10 > perServing*6 {
		t.Errorf("rested connections hold %d bytes of stack each, want at most 60%% of the %d they held before resting", perRested, perServing)
	}
	shed := (serving.heap - rested.heap) / n
	t.Logf("heap per idle connection: %d bytes fewer once rested", shed)
	// The response head buffer alone is a 512-byte allocation.
	if shed < 400 {
		t.Errorf("rested connections hold %d bytes of heap fewer each, want their head buffers (400 or more) let go", shed)
	}
	// The rested connections still serve.
	for i, c := range conns[:5] {
		write(t, c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
		if resp, _ := readResponse(t, readers[i], "GET"); resp.StatusCode != 200 {
			t.Fatalf("request %d after resting: %d", i, resp.StatusCode)
		}
	}
}
