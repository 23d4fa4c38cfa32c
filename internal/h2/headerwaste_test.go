package h2

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A client whose requests are within every limit relay advertises (the
// stream limit, SETTINGS_MAX_HEADER_LIST_SIZE) but carry large header
// lists has some of them refused when its open streams hold relay's
// bound on header memory. REFUSED_STREAM there is relay's bound, which the
// client cannot know, not the client's fault: a browser that sends the
// refused requests again, as RFC 9113 8.7 lets it, must not be cut off as
// Rapid Reset however many of them are refused.
func TestStreamsRefusedForHeaderMemoryAreNotWaste(t *testing.T) {
	release := make(chan struct{})
	b := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := rawHead(br); err != nil {
				return
			}
			<-release
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
	lim := defaultLimits()
	lim.MaxHeaderBytes = 64 << 10 // large cookies allowed: 30 KB lists are within it
	f := startFrontOpts(t, testBodyTime, lim, frontOptions{}, b)
	t.Cleanup(func() { close(release) })
	rc := dialRaw(t, f.addr)
	pad := func(id uint32) string { return strings.Repeat(fmt.Sprintf("%x", id%16), 30000) }

	id := uint32(1)
	opened, refusals := 0, 0
	// Pages of 100 requests each, every refused one sent again until all
	// are answered; bounded in pages and in rounds.
	for page := 0; page < 4 && opened < 700; page++ {
		// Each page is bounded on its own: under the race detector, on a
		// busy machine, the four together can take longer than one.
		rc.nc.SetDeadline(time.Now().Add(ioTimeout))
		pending := 100
		for round := 0; pending > 0; round++ {
			if round == 20 {
				t.Fatalf("page %d: %d requests still refused after %d rounds", page, pending, round)
			}
			if round == 0 {
				t.Logf("page %d: %d opened, %d refused so far", page, opened, refusals)
			}
			var ids []uint32
			for range pending {
				rc.get(id, "/", "x-pad", pad(id))
				ids = append(ids, id)
				id += 2
			}
			opened += len(ids)
			refused := map[uint32]bool{}
			for _, h := range rc.sync() {
				if h.Type == http2.FrameGoAway {
					t.Fatalf("GOAWAY after %d streams opened, %d refused for header memory", opened, refusals)
				}
				if h.Type == http2.FrameRSTStream {
					if h.StreamID >= ids[0] {
						refused[h.StreamID] = true
					}
				}
			}
			var taken []uint32
			for _, s := range ids {
				if !refused[s] {
					taken = append(taken, s)
				}
			}
			if len(taken) == 0 {
				t.Fatalf("every one of %d streams refused while none was open", len(ids))
			}
			for range taken {
				release <- struct{}{}
			}
			for s, r := range rc.responses(taken...) {
				if r.status != 200 {
					t.Fatalf("stream %d: status %d, reset %v (%v)", s, r.status, r.reset, r.code)
				}
			}
			refusals += len(refused)
			pending = len(refused)
		}
	}
	t.Logf("%d streams opened, %d refused for header memory and sent again", opened, refusals)
	if 2*refusals <= opened {
		t.Fatalf("only %d of %d streams refused: the test does not reach the Rapid Reset rule's share", refusals, opened)
	}
}

// The refusals for header memory are not free either: a client that
// keeps its open streams at the bound and sends refused streams without
// end pays for each from the control budget, and is cut off.
func TestEndlessStreamsRefusedForHeaderMemoryAreCutOff(t *testing.T) {
	release := make(chan struct{})
	b := connBackend(t, func(c net.Conn) {
		if _, err := rawHead(bufio.NewReader(c)); err == nil {
			<-release
		}
	})
	lim := defaultLimits()
	f := startFrontOpts(t, testBodyTime, lim, frontOptions{}, b)
	t.Cleanup(func() { close(release) })
	rc := dialRaw(t, f.addr)
	pad := strings.Repeat("p", 15000)
	id := uint32(1)
	for range 60 { // more than the bound holds
		rc.get(id, "/", "x-pad", pad)
		id += 2
	}
	rc.sync()
	sent := 0
	for sent < 3*controlBudget {
		for range 50 {
			rc.hbuf.Reset()
			for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "relay.test"}, {":path", "/"}, {"x-pad", pad}} {
				rc.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
			}
			if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
				t.Logf("relay closed the connection after %d refused streams", sent)
				checkCutAt(t, sent)
				return
			}
			id += 2
			sent++
		}
		if err := rc.fr.WritePing(false, [8]byte{'s'}); err != nil {
			checkCutAt(t, sent)
			return
		}
		for {
			fr, err := rc.read()
			if err != nil {
				t.Logf("relay closed the connection after %d refused streams", sent)
				checkCutAt(t, sent)
				return
			}
			if g, ok := fr.(*http2.GoAwayFrame); ok {
				if g.ErrCode != http2.ErrCodeEnhanceYourCalm {
					t.Fatalf("GOAWAY %v after %d refused streams, want ENHANCE_YOUR_CALM", g.ErrCode, sent)
				}
				t.Logf("GOAWAY ENHANCE_YOUR_CALM after %d refused streams", sent)
				checkCutAt(t, sent)
				return
			}
			if p, ok := fr.(*http2.PingFrame); ok && p.IsAck() {
				break
			}
		}
	}
	t.Fatalf("%d streams refused for header memory and the connection is still open", sent)
}

// checkCutAt fails unless a flood of sent refused streams was cut where
// the control budget runs out: controlBudget, and what the streams held
// and the seconds the test took earned.
func checkCutAt(t *testing.T, sent int) {
	t.Helper()
	if sent < controlBudget || sent > 2*controlBudget {
		t.Fatalf("cut off after %d refused streams, want between %d and %d", sent, controlBudget, 2*controlBudget)
	}
}
