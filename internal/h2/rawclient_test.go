package h2

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawConn is an HTTP/2 client made of frames, for what Go's client will
// not do or does not show: windows granted by hand, resets, malformed
// requests, the frames of a response as they arrive.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	// autoWindow gives back the window of every DATA frame read, on the
	// connection and the stream; off, the test grants window itself.
	autoWindow bool
	// settings is the server's SETTINGS, once read.
	settings map[http2.SettingID]uint32
}

// dialRaw connects to addr and sends the client preface with settings.
// Every read and write is bounded by ioTimeout from now.
func dialRaw(t *testing.T, addr string, settings ...http2.Setting) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(ioTimeout))
	rc := &rawConn{t: t, nc: nc, autoWindow: true}
	rc.fr = http2.NewFramer(nc, nc)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.fr.MaxHeaderListSize = 1 << 20
	rc.enc = hpack.NewEncoder(&rc.hbuf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := rc.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return rc
}

// read reads the next frame. It acknowledges the server's SETTINGS and
// answers its PINGs, and with autoWindow gives back DATA's window; the
// frame is returned all the same.
func (rc *rawConn) read() (http2.Frame, error) {
	f, err := rc.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			if rc.settings == nil {
				rc.settings = map[http2.SettingID]uint32{}
			}
			f.ForeachSetting(func(s http2.Setting) error { rc.settings[s.ID] = s.Val; return nil })
			err = rc.fr.WriteSettingsAck()
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			err = rc.fr.WritePing(true, f.Data)
		}
	case *http2.DataFrame:
		if rc.autoWindow && f.Length > 0 {
			err = rc.fr.WriteWindowUpdate(0, f.Length)
			if err == nil && !f.StreamEnded() {
				err = rc.fr.WriteWindowUpdate(f.StreamID, f.Length)
			}
		}
	}
	return f, err
}

// next is read, failing the test on an error.
func (rc *rawConn) next() http2.Frame {
	rc.t.Helper()
	f, err := rc.read()
	if err != nil {
		rc.t.Fatalf("reading a frame: %v", err)
	}
	return f
}

// writeHeaders sends a header block of name, value pairs on stream id,
// in HEADERS and, past 16 KiB, CONTINUATION frames.
func (rc *rawConn) writeHeaders(id uint32, end bool, fields ...string) {
	rc.t.Helper()
	rc.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		rc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	block := rc.hbuf.Bytes()
	const max = 16384
	frag := block[:min(len(block), max)]
	block = block[len(frag):]
	err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		frag = block[:min(len(block), max)]
		block = block[len(frag):]
		err = rc.fr.WriteContinuation(id, len(block) == 0, frag)
	}
	if err != nil {
		rc.t.Fatalf("writing headers: %v", err)
	}
}

// request returns the fields of a request for path, then extra.
func request(method, path string, extra ...string) []string {
	return append([]string{":method", method, ":scheme", "http", ":authority", "relay.test", ":path", path}, extra...)
}

// get sends a GET for path on stream id, with no body.
func (rc *rawConn) get(id uint32, path string, extra ...string) {
	rc.t.Helper()
	rc.writeHeaders(id, true, request("GET", path, extra...)...)
}

// rawResponse is what arrived on one stream.
type rawResponse struct {
	interim []int // informational statuses, in order
	status  int
	fields  []hpack.HeaderField // the final response's, pseudo-fields left out
	// trailers are the fields of a HEADERS frame after the final
	// response's.
	trailers []hpack.HeaderField
	body     []byte
	frames   []http2.FrameType // the stream's frames, in order
	ended    bool              // END_STREAM arrived
	reset    bool              // RST_STREAM arrived
	code     http2.ErrCode     // its code
}

// get returns the values of the field named name (lower case).
func (r *rawResponse) get(name string) []string {
	var vs []string
	for _, f := range r.fields {
		if f.Name == name {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// responses reads frames until every stream in ids has ended or been
// reset, and returns what arrived on each. Frames of other streams are
// dropped; a GOAWAY fails the test.
func (rc *rawConn) responses(ids ...uint32) map[uint32]*rawResponse {
	rc.t.Helper()
	rs := make(map[uint32]*rawResponse, len(ids))
	for _, id := range ids {
		rs[id] = &rawResponse{}
	}
	open := len(ids)
	for open > 0 {
		f := rc.next()
		if g, ok := f.(*http2.GoAwayFrame); ok {
			rc.t.Fatalf("GOAWAY (last stream %d, %v) while waiting for streams %v", g.LastStreamID, g.ErrCode, ids)
		}
		r := rs[f.Header().StreamID]
		if r == nil || r.ended || r.reset {
			continue
		}
		r.frames = append(r.frames, f.Header().Type)
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status, _ := strconv.Atoi(f.PseudoValue("status"))
			switch {
			case r.status != 0:
				r.trailers = f.RegularFields()
			case status < 200:
				r.interim = append(r.interim, status)
			default:
				r.status = status
				r.fields = f.RegularFields()
			}
			r.ended = f.StreamEnded()
		case *http2.DataFrame:
			r.body = append(r.body, f.Data()...)
			r.ended = f.StreamEnded()
		case *http2.RSTStreamFrame:
			r.reset, r.code = true, f.ErrCode
		}
		if r.ended || r.reset {
			open--
		}
	}
	return rs
}

// response reads stream id's response.
func (rc *rawConn) response(id uint32) *rawResponse {
	rc.t.Helper()
	return rc.responses(id)[id]
}

// goAway reads frames until a GOAWAY and returns it.
func (rc *rawConn) goAway() *http2.GoAwayFrame {
	rc.t.Helper()
	for {
		if g, ok := rc.next().(*http2.GoAwayFrame); ok {
			return g
		}
	}
}

// waitClosed reads until the server closes the connection; it returns
// nil once it has (EOF or a reset), the error if the read timed out.
func (rc *rawConn) waitClosed() error {
	for {
		if _, err := rc.read(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return err
			}
			return nil
		}
	}
}

// sync sends a PING and returns the headers of the frames that arrived
// before its ACK: everything relay sent before it read the PING.
func (rc *rawConn) sync() []http2.FrameHeader {
	rc.t.Helper()
	data := [8]byte{'s', 'y', 'n', 'c'}
	if err := rc.fr.WritePing(false, data); err != nil {
		rc.t.Fatal(err)
	}
	var hs []http2.FrameHeader
	for {
		f := rc.next()
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == data {
			return hs
		}
		hs = append(hs, f.Header())
	}
}
