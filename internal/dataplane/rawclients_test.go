package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawReq is a request the tests' clients send exactly as written: the
// target goes on the wire as the HTTP/1.1 request target or the HTTP/2
// :path, with no client normalising it.
type rawReq struct {
	method string // GET when ""
	target string
	host   string      // the Host field or :authority; "" sends none
	header [][2]string // more fields, in order
	proto  string      // HTTP/1.1 only: the version, HTTP/1.1 when ""
}

// reply is a response as the raw clients read it. status is -1 when an
// HTTP/2 stream was reset instead of answered (body says why).
type reply struct {
	status int
	header http.Header
	body   []byte
}

// seen decodes the body as an echo backend's answer; nil when relay
// answered itself.
func (r *reply) seen() *seen {
	if r.header.Get("X-Who") == "" {
		return nil
	}
	var s seen
	if err := json.Unmarshal(r.body, &s); err != nil {
		return nil
	}
	return &s
}

func (r *reply) String() string {
	return fmt.Sprintf("%d %v %q", r.status, r.header, r.body)
}

// sends names the two front doors' raw clients, for tests that run a case
// over both.
var sends = []struct {
	proto string
	send  func(t testing.TB, addr string, rq rawReq) reply
}{
	{"HTTP/1.1", sendH1},
	{"HTTP/2", sendH2},
}

// sendH1 sends rq on a new connection, with Connection: close, and reads
// the response.
func sendH1(t testing.TB, addr string, rq rawReq) reply {
	t.Helper()
	return sendH1On(t, dialTCP(t, addr), rq)
}

// dialTCP connects to addr; every read and write is bounded by ioTimeout
// from now.
func dialTCP(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(ioTimeout))
	return nc
}

// sendH1On is sendH1 on a connection it then closes.
func sendH1On(t testing.TB, nc net.Conn, rq rawReq) reply {
	t.Helper()
	defer nc.Close()
	method, proto := rq.method, rq.proto
	if method == "" {
		method = "GET"
	}
	if proto == "" {
		proto = "HTTP/1.1"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\r\n", method, rq.target, proto)
	if rq.host != "" {
		fmt.Fprintf(&b, "Host: %s\r\n", rq.host)
	}
	for _, f := range rq.header {
		fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
	}
	b.WriteString("Connection: close\r\n\r\n")
	if _, err := io.WriteString(nc, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %q: reading the response: %v", method, rq.target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %q: reading the body: %v", method, rq.target, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// sendH2 opens an h2c connection with prior knowledge, sends rq as one
// HEADERS frame on stream 1 (hpack-encoded here, so :path is exactly
// rq.target) and reads the frames of the answer.
func sendH2(t testing.TB, addr string, rq rawReq) reply {
	t.Helper()
	return sendH2On(t, dialTCP(t, addr), "http", rq)
}

// sendH2On is sendH2 on a connection it then closes, with the :scheme
// scheme.
func sendH2On(t testing.TB, nc net.Conn, scheme string, rq rawReq) reply {
	t.Helper()
	defer nc.Close()
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	method := rq.method
	if method == "" {
		method = "GET"
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.WriteField(hpack.HeaderField{Name: ":method", Value: method})
	enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: scheme})
	enc.WriteField(hpack.HeaderField{Name: ":path", Value: rq.target})
	if rq.host != "" {
		enc.WriteField(hpack.HeaderField{Name: ":authority", Value: rq.host})
	}
	for _, f := range rq.header {
		enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	return readH2Reply(t, fr, fmt.Sprintf("%s %q over HTTP/2", method, rq.target))
}

// readH2Reply reads the answer on stream 1 from fr, acknowledging the
// SETTINGS and PINGs that come meanwhile: its status, the fields of its
// head and trailers, and its body. A RST_STREAM of stream 1 is a reply of
// status -1 whose body names the error code. what names the request in a
// failure.
func readH2Reply(t testing.TB, fr *http2.Framer, what string) reply {
	t.Helper()
	r := reply{header: http.Header{}}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%s: %v (so far: %v)", what, err, &r)
		}
		end := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				break
			}
			for _, hf := range f.Fields {
				if hf.Name == ":status" {
					fmt.Sscan(hf.Value, &r.status)
				} else if !hf.IsPseudo() {
					r.header.Add(hf.Name, hf.Value)
				}
			}
			end = f.StreamEnded()
		case *http2.DataFrame:
			if f.StreamID == 1 {
				r.body = append(r.body, f.Data()...)
				end = f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return reply{status: -1, header: http.Header{}, body: []byte("RST_STREAM " + f.ErrCode.String())}
			}
		case *http2.GoAwayFrame:
			t.Fatalf("%s: GOAWAY %v %q before the answer", what, f.ErrCode, f.DebugData())
		}
		if err != nil {
			t.Fatal(err)
		}
		if end {
			return r
		}
	}
}
