package h2

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/logging"
	"relay/internal/testlog"
)

// floodResult is what a client flooding relay saw.
type floodResult struct {
	sent   int                 // frames the client wrote
	goAway *http2.GoAwayFrame  // relay's GOAWAY, if one came
	frames []http2.FrameHeader // what relay sent before it
	ended  bool                // relay closed the connection (not a timeout)
}

// flood writes frames with send, up to max of them, while a goroutine
// reads what relay sends, until relay sends GOAWAY or ends the
// connection. It waits for the end, for as long as rc's deadline.
func flood(t *testing.T, rc *rawConn, max int, send func(i int) error) floodResult {
	t.Helper()
	var res floodResult
	var sawGoAway atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				var ne net.Error
				res.ended = !(errors.As(err, &ne) && ne.Timeout())
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok && res.goAway == nil {
				res.goAway = &http2.GoAwayFrame{LastStreamID: g.LastStreamID, ErrCode: g.ErrCode}
				sawGoAway.Store(true)
			}
			if res.goAway == nil {
				res.frames = append(res.frames, f.Header())
			}
		}
	}()
	for i := 0; i < max && !sawGoAway.Load(); i++ {
		if send(i) != nil {
			break // closed
		}
		res.sent++
	}
	if sawGoAway.Load() {
		// As a client does that has its GOAWAY: relay, reading until
		// the client is done, need not wait out its linger.
		rc.nc.(*net.TCPConn).CloseWrite()
	}
	await(t, done, "the end of the connection")
	return res
}

// cutOff fails the test unless relay sent GOAWAY ENHANCE_YOUR_CALM and
// closed the connection.
func (r floodResult) cutOff(t *testing.T, what string) {
	t.Helper()
	if r.goAway == nil || r.goAway.ErrCode != http2.ErrCodeEnhanceYourCalm || !r.ended {
		got := "no GOAWAY"
		if r.goAway != nil {
			got = "GOAWAY " + r.goAway.ErrCode.String()
		}
		t.Fatalf("%s: %d frames sent; %s, closed %v; want GOAWAY ENHANCE_YOUR_CALM and the end", what, r.sent, got, r.ended)
	}
}

// closedOrCalmed fails the test unless relay closed the connection, with
// no GOAWAY but ENHANCE_YOUR_CALM. A client that writes far ahead of
// relay, as many flooding at once do, may have more bytes in flight than
// relay reads after its GOAWAY (lingerBytes); closing with them unread
// resets the connection, and the reset can overtake the GOAWAY. Tests
// whose point is elsewhere (the log) accept that; cutOff holds the rest
// to the GOAWAY.
func (r floodResult) closedOrCalmed(t *testing.T, what string) {
	t.Helper()
	if !r.ended || r.goAway != nil && r.goAway.ErrCode != http2.ErrCodeEnhanceYourCalm {
		got := "no GOAWAY"
		if r.goAway != nil {
			got = "GOAWAY " + r.goAway.ErrCode.String()
		}
		t.Fatalf("%s: %d frames sent; %s, closed %v; want the end, after GOAWAY ENHANCE_YOUR_CALM if any", what, r.sent, got, r.ended)
	}
}

// warnings returns the WARN lines in buf whose message contains sub,
// decoded.
func warnings(t *testing.T, buf *testlog.Buffer, sub string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.Contains(line, sub) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" {
			out = append(out, m)
		}
	}
	return out
}

// servesAnother fails the test unless a well-behaved client on a new
// connection gets its answer.
func servesAnother(t *testing.T, f *front) {
	t.Helper()
	res, err := h2Client(t).Get(f.url + "/")
	if err != nil {
		t.Fatalf("another client: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("another client: status %d", res.StatusCode)
	}
}

// Floods of frames that carry no request (CVE-2019-9512, -9515, -9518
// and their kin) are cut off with GOAWAY ENHANCE_YOUR_CALM once the
// control budget is spent, though the client reads all relay sends; the
// flood is logged once, and another client is served.
func TestControlFrameFloodsAreCutOff(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			io.Copy(io.Discard, r.Body)
			return
		}
		w.Write([]byte("ok"))
	})
	log, logs := testlog.New()
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{log: log}, b)
	// Each flood's line, however fast they come (the rate limit has a
	// test of its own).
	f.srv.abuseLog = logging.NewLimited(log, 1000, time.Second)
	// Three times the budget, to be cut off with room to spare; and no
	// more, so that what the client has sent past the GOAWAY (at most
	// 2,000 frames of at most 17 bytes) stays within what relay reads
	// after it (lingerBytes). A client that writes further ahead has
	// relay close with its bytes unread, and the reset that sends can
	// overtake the GOAWAY in a loaded machine's buffers.
	const max = 3 * controlBudget

	// Each flood opens what it needs on rc and returns its sender.
	floods := []struct {
		name  string
		start func(t *testing.T, rc *rawConn) func(i int) error
	}{
		{"PING", func(t *testing.T, rc *rawConn) func(int) error {
			return func(i int) error { return rc.fr.WritePing(false, [8]byte{byte(i)}) }
		}},
		{"PING ACK", func(t *testing.T, rc *rawConn) func(int) error {
			return func(i int) error { return rc.fr.WritePing(true, [8]byte{byte(i)}) }
		}},
		{"SETTINGS", func(t *testing.T, rc *rawConn) func(int) error {
			return func(int) error { return rc.fr.WriteSettings() }
		}},
		{"PRIORITY", func(t *testing.T, rc *rawConn) func(int) error {
			return func(i int) error { return rc.fr.WritePriority(uint32(2*i+1), http2.PriorityParam{Weight: 15}) }
		}},
		{"WINDOW_UPDATE", func(t *testing.T, rc *rawConn) func(int) error {
			return func(int) error { return rc.fr.WriteWindowUpdate(0, 1) }
		}},
		{"RST_STREAM of a closed stream", func(t *testing.T, rc *rawConn) func(int) error {
			rc.get(1, "/")
			rc.response(1)
			return func(int) error { return rc.fr.WriteRSTStream(1, http2.ErrCodeCancel) }
		}},
		{"empty DATA", func(t *testing.T, rc *rawConn) func(int) error {
			rc.writeHeaders(1, false, request("POST", "/wait")...)
			return func(int) error { return rc.fr.WriteData(1, false, nil) }
		}},
		{"padding-only DATA", func(t *testing.T, rc *rawConn) func(int) error {
			rc.writeHeaders(1, false, request("POST", "/wait")...)
			return func(int) error { return rc.fr.WriteDataPadded(1, false, nil, []byte{0, 0, 0}) }
		}},
		{"DATA of a reset stream", func(t *testing.T, rc *rawConn) func(int) error {
			// relay resets a stream whose body is longer than declared;
			// its frames in flight are ignored.
			rc.writeHeaders(1, false, request("POST", "/wait", "content-length", "1")...)
			if err := rc.fr.WriteData(1, false, []byte("too long")); err != nil {
				t.Fatal(err)
			}
			return func(int) error { return rc.fr.WriteData(1, false, []byte{'x'}) }
		}},
		{"empty CONTINUATION", func(t *testing.T, rc *rawConn) func(int) error {
			rc.hbuf.Reset()
			for _, hf := range requestFields("GET", "/") {
				rc.enc.WriteField(hf)
			}
			if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.hbuf.Bytes(), EndStream: true}); err != nil {
				t.Fatal(err)
			}
			return func(int) error { return rc.fr.WriteContinuation(1, false, nil) }
		}},
		{"unknown type", func(t *testing.T, rc *rawConn) func(int) error {
			return func(int) error { return rc.fr.WriteRawFrame(0x20, 0, 0, nil) }
		}},
	}
	for _, fl := range floods {
		t.Run(fl.name, func(t *testing.T) {
			before := len(warnings(t, logs, "flood"))
			rc := dialRaw(t, f.addr)
			r := flood(t, rc, max, fl.start(t, rc))
			r.cutOff(t, fl.name)
			lines := warnings(t, logs, "flood")[before:]
			if len(lines) != 1 {
				t.Fatalf("%d warnings for one connection, want 1: %v", len(lines), lines)
			}
			if n, _ := lines[0]["frames"].(float64); n > controlBudget+50 {
				t.Errorf("relay took %v frames of the flood; want at most %d", n, controlBudget+50)
			}
			servesAnother(t, f)
		})
	}
}

// requestFields are the fields of a request for path.
func requestFields(method, path string) []hpack.HeaderField {
	fields := request(method, path)
	var hfs []hpack.HeaderField
	for i := 0; i+1 < len(fields); i += 2 {
		hfs = append(hfs, hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return hfs
}

// Clients busy with control frames for their own good are not cut off: a
// download granted back frame by frame on the stream and the connection,
// with a PING every few frames (as gRPC measures bandwidth), and a
// browser-like client that sends PRIORITY frames as it starts, then
// PRIORITY, PRIORITY_UPDATE and PING frames with each request and cancels
// each stream after its answer.
func TestBusyWellBehavedClientsAreNotCutOff(t *testing.T) {
	const size = 12 << 20 // more DATA frames than the budget has frames
	body := pattern(size)
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(body)
			return
		}
		w.Write([]byte("ok"))
	})
	log, logs := testlog.New()
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{log: log}, b)

	t.Run("download", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.get(1, "/big")
		var got, frames, pings int
		for ended := false; !ended; {
			switch fr := rc.next().(type) {
			case *http2.DataFrame:
				got += len(fr.Data())
				ended = fr.StreamEnded()
				if frames++; frames%4 == 0 {
					pings++
					if err := rc.fr.WritePing(false, [8]byte{'b', 'd', 'p'}); err != nil {
						t.Fatal(err)
					}
				}
			case *http2.RSTStreamFrame:
				t.Fatalf("stream reset (%v) after %d bytes", fr.ErrCode, got)
			case *http2.GoAwayFrame:
				t.Fatalf("GOAWAY (%v) after %d bytes, %d DATA frames", fr.ErrCode, got, frames)
			}
		}
		if got != size {
			t.Fatalf("got %d bytes, want %d", got, size)
		}
		if control := 2*frames + pings; control <= controlBudget {
			t.Fatalf("only %d control frames sent: the budget was never at stake", control)
		}
		t.Logf("%d DATA frames; %d WINDOW_UPDATE and %d PING frames sent", frames, 2*frames, pings)
	})

	t.Run("browser", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.fr.WriteWindowUpdate(0, 12<<20)
		for id := uint32(3); id <= 13; id += 2 {
			// The dependency tree some browsers build on idle streams.
			rc.fr.WritePriority(id, http2.PriorityParam{Weight: 200})
		}
		const requests = 400 // five control frames each: twice the budget
		for i := range requests {
			id := uint32(15 + 2*i)
			rc.get(id, "/")
			rc.fr.WritePriority(id, http2.PriorityParam{StreamDep: 3, Weight: 100})
			rc.fr.WriteRawFrame(0x10, 0, 0, []byte{0, 0, 0, byte(id), 'u', '=', '1'}) // PRIORITY_UPDATE
			if r := rc.response(id); r.status != 200 {
				t.Fatalf("request %d: status %d", i, r.status)
			}
			rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			rc.sync() // a PING
		}
	})
	if w := warnings(t, logs, "HTTP/2"); len(w) > 0 {
		t.Errorf("warnings: %v", w)
	}
}
