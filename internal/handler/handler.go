// Package handler is a front door for Go's net/http servers: an
// http.Handler over relay's forwarding core. Whatever the server speaks to
// the client (HTTP/1.1, or HTTP/2 with or without TLS), the core picks,
// forwards over its HTTP/1.1 upstream connections, retries and accounts
// exactly as it does for relay's own HTTP/1.1 front door (package proxy).
//
// This door trades speed for reach: net/http allocates per request where
// relay's own engine does not, so relay serves HTTP/1.1 with package proxy
// and uses this door where net/http is the only way in (HTTP/2).
//
// What net/http does itself: it answers Expect: 100-continue when the body
// is first read, reads chunked request bodies, and frames responses. A
// request body of unknown length goes upstream chunked. Request trailers
// are not forwarded; response trailers are not passed on.
package handler

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"relay/internal/core"
	"relay/internal/h1"
)

// Handler forwards every request it serves through a core.
type Handler struct {
	core *core.Core
	body core.BodyTime
}

// New returns a Handler over c whose clients have the time bt gives to
// send a request body; a zero bt sets no deadline.
func New(c *core.Core, bt core.BodyTime) *Handler { return &Handler{core: c, body: bt} }

// exchanges recycles the per-request state, whose buffers grow to fit the
// requests seen.
var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// exchange is one request through this door: the core's Exchange, the
// request view built from the *http.Request, and the Responder answering
// through the http.ResponseWriter.
type exchange struct {
	x    core.Exchange
	req  h1.Request
	peer core.Peer
	body body
	w    http.ResponseWriter
	rc   http.ResponseController
	r    *http.Request
	// abort is set when the response was cut short: the client must see a
	// broken response, not a complete wrong one.
	abort bool
}

// ServeHTTP forwards r through the core.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	growStack(0)
	e := exchanges.Get().(*exchange)
	defer func() {
		e.body.stop()
		*e = exchange{req: h1.Request{Fields: e.req.Fields[:0]}, x: e.x}
		e.x.Req, e.x.Body, e.x.Door, e.x.Peer = nil, nil, nil, nil
		exchanges.Put(e)
	}()
	e.w, e.r, e.rc = w, r, *http.NewResponseController(w)
	ctx := r.Context()
	e.peer = h.peerOf(ctx, r)
	if ctx.Err() != nil {
		// The client cancelled the stream before relay started on it:
		// nothing to forward, nobody to answer (nginx's 499).
		h.core.LogRejected(&e.peer, 499)
		streamEnded(ctx, true)
		return
	}
	e.view(r)
	e.x.Req, e.x.Door, e.x.Peer, e.x.Proto = &e.req, e, &e.peer, r.Proto
	if e.req.HasBody() {
		e.body = body{rc: r.Body, ctl: &e.rc, time: &h.body, start: time.Now()}
		e.x.Body = &e.body
	}
	h.core.Forward(&e.x)
	streamEnded(ctx, ctx.Err() != nil)
	if e.abort {
		panic(http.ErrAbortHandler)
	}
}

type peerKey struct{}

// withPeer works out the client of connection c once, for all the streams
// it will carry (http.Server.ConnContext).
func (h *Handler) withPeer(ctx context.Context, c net.Conn) context.Context {
	var addr netip.AddrPort
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		addr = a.AddrPort()
	}
	_, isTLS := c.(*tls.Conn)
	return context.WithValue(ctx, peerKey{}, h.core.NewPeer(addr, isTLS))
}

// peerOf returns the client of r's connection: the one withPeer worked
// out, or, on a server without it, r's.
func (h *Handler) peerOf(ctx context.Context, r *http.Request) core.Peer {
	if p, ok := ctx.Value(peerKey{}).(core.Peer); ok {
		return p
	}
	addr, _ := netip.ParseAddrPort(r.RemoteAddr)
	return h.core.NewPeer(addr, r.TLS != nil)
}

// view fills the request view the core reads from r.
func (e *exchange) view(r *http.Request) {
	req := &e.req
	req.Method = bytesOf(r.Method)
	req.Target = bytesOf(r.URL.RequestURI())
	if r.Method == http.MethodOptions && r.RequestURI == "*" {
		req.Target = bytesOf("*")
	}
	req.Minor = 1
	if r.Host != "" {
		req.Host = bytesOf(r.Host)
	}
	fields := req.Fields[:0]
	for name, values := range r.Header {
		for _, v := range values {
			fields = append(fields, h1.Field{Name: bytesOf(name), Value: bytesOf(v)})
		}
	}
	req.Upgrade = h1.MarkHopByHop(fields) && r.ProtoMajor == 1
	for i := range fields {
		switch {
		case fields[i].Is("expect"):
			fields[i].Hop = true // net/http answered it
		case req.Upgrade && fields[i].Is("upgrade"):
			req.UpgradeProto = fields[i].Value
		}
	}
	req.Fields = fields
	req.ContentLength = r.ContentLength
	switch {
	case r.Body == nil || r.Body == http.NoBody:
		req.ContentLength = 0
	case r.ContentLength < 0:
		req.Chunked = true
	}
}

// body is the request body as the core reads it, each read bounded by the
// deadline the Handler's BodyTime gives. As on relay's HTTP/1.1 door the
// bound holds only while a read waits for the client: a backend slow to
// take the body does not count against the client. Over HTTP/2 a stalled
// stream is thereby answered while its connection's other streams go on.
type body struct {
	rc    io.ReadCloser
	ctl   *http.ResponseController
	time  *core.BodyTime
	start time.Time // when the request's head arrived
	got   int64     // body bytes read so far
	watch *readWatch
	done  bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.time.Idle > 0 {
		if b.watch == nil {
			b.watch = &readWatch{ctl: b.ctl}
		}
		b.watch.arm(b.time.Deadline(time.Now(), b.start, b.got))
	}
	n, err := b.rc.Read(p)
	if b.watch != nil {
		b.watch.disarm()
	}
	b.got += int64(n)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// stop ends the body's watch: the request is over.
func (b *body) stop() {
	if b.watch != nil {
		b.watch.stop()
	}
}

// readWatch times the body's reads. A read deadline set on the stream
// would be a timer running between reads too, and each setting a message
// to the HTTP/2 connection's goroutine; the watch's own timer instead ends
// the stream's body (a deadline in the past, which net/http applies at
// once) only if it fires while a read is waiting past its deadline. It is
// allocated per request, so a timer firing late cannot reach a later
// request's stream.
type readWatch struct {
	mu      sync.Mutex
	ctl     *http.ResponseController
	timer   *time.Timer
	at      time.Time // the waiting read's deadline
	reading bool
	over    bool // the handler is done: the stream is not to be touched
}

func (w *readWatch) arm(at time.Time) {
	w.mu.Lock()
	w.at, w.reading = at, true
	if w.timer == nil {
		w.timer = time.AfterFunc(time.Until(at), w.expire)
	} else {
		w.timer.Reset(time.Until(at))
	}
	w.mu.Unlock()
}

func (w *readWatch) disarm() {
	w.mu.Lock()
	w.reading = false
	w.mu.Unlock()
}

// expire ends the body if a read is still waiting past its deadline; a
// firing meant for an earlier read finds a later deadline and does
// nothing.
func (w *readWatch) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reading && !w.over && !time.Now().Before(w.at) {
		w.ctl.SetReadDeadline(time.Unix(1, 0))
	}
}

func (w *readWatch) stop() {
	w.mu.Lock()
	w.over = true
	w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (b *body) Prefix() []byte   { return nil }
func (b *body) Done() bool       { return b.done }
func (b *body) Trailers() []byte { return nil }

// Continue does nothing: net/http sends 100 Continue when the body is
// first read.
func (e *exchange) Continue() error { return nil }

// Interim sends an informational response (103 Early Hints and the like)
// and leaves the header map as it was for the final response.
func (e *exchange) Interim(resp *h1.Response) error {
	hdr := e.w.Header()
	saved := hdr.Clone()
	copyFields(hdr, resp.Fields, -1)
	e.w.WriteHeader(resp.Status)
	for k := range hdr {
		delete(hdr, k)
	}
	for k, v := range saved {
		hdr[k] = v
	}
	return nil
}

// Respond sends the backend's response through the ResponseWriter,
// flushing as body bytes arrive so streamed responses stream.
func (e *exchange) Respond(resp *h1.Response, rb *core.ResponseBody) (n int64, rerr, werr error) {
	length := int64(-1)
	if resp.ContentLength >= 0 && resp.Status >= 200 && resp.Status != 204 && resp.Status != 304 {
		length = resp.ContentLength
	}
	copyFields(e.w.Header(), resp.Fields, length)
	e.w.WriteHeader(resp.Status)
	fw := flushWriter{w: e.w, rc: &e.rc, left: -1}
	if resp.Body == h1.BodyLength {
		fw.left = resp.ContentLength
	}
	if p := rb.Prefix(); len(p) > 0 {
		k, err := fw.Write(p)
		n += int64(k)
		if err != nil {
			e.abort = true
			return n, nil, err
		}
	}
	if !rb.Done() {
		k, rerr, werr := h1.CopyBody(&fw, rb, false)
		n += k
		if rerr != nil || werr != nil {
			e.abort = true
			return n, rerr, werr
		}
	}
	return n, nil, nil
}

// Tunnel takes the client connection over from net/http (HTTP/1.1 only:
// the view never asks for an upgrade over HTTP/2) and copies bytes both
// ways.
func (e *exchange) Tunnel(resp *h1.Response, up net.Conn, early []byte) int64 {
	client, brw, err := e.rc.Hijack()
	if err != nil {
		e.Error(http.StatusBadGateway, "cannot take over the connection for the protocol switch")
		return 0
	}
	defer client.Close()
	out := h1.AppendStatusLine(nil, 101, resp.Reason)
	out = h1.AppendForwardFields(out, resp.Fields)
	out = append(out, "Connection: Upgrade\r\n"...)
	for i := range resp.Fields {
		if resp.Fields[i].Is("upgrade") {
			out = h1.AppendField(out, []byte("Upgrade"), resp.Fields[i].Value)
		}
	}
	out = append(append(out, '\r', '\n'), early...)
	if _, err := client.Write(out); err != nil {
		return 0
	}
	if k := brw.Reader.Buffered(); k > 0 {
		pending, _ := brw.Reader.Peek(k)
		if _, err := up.Write(pending); err != nil {
			return 0
		}
	}
	sent := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(client, up)
		client.Close()
		sent <- n
	}()
	io.Copy(up, client)
	up.Close()
	return <-sent
}

// Gone reports whether the client cancelled the request: net/http cancels
// its context when the connection closes or, over HTTP/2, the stream is
// reset.
func (e *exchange) Gone() bool { return e.r.Context().Err() != nil }

// Error answers with relay's own error response, worded as the HTTP/1.1
// door words it.
func (e *exchange) Error(status int, msg string) (int64, error) {
	hdr := e.w.Header()
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	if status == 503 {
		hdr.Set("Retry-After", core.RetryAfter)
	}
	text := core.AppendErrorBody(nil, status, msg)
	hdr.Set("Content-Length", strconv.Itoa(len(text)))
	e.w.WriteHeader(status)
	n, err := e.w.Write(text)
	return int64(n), err
}

// bytesOf returns the bytes of s without copying them. The core only
// reads a request view's bytes (h1.Request), and a string's bytes never
// change, so the view may share them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// copyFields adds the fields to be forwarded to hdr, and a Content-Length
// when length is 0 or more. Every name and value is cut from one string,
// and every key's values from one slice, so a response's header costs two
// allocations (and the map's growth) however many fields it has, where
// Header.Add would make a string for each name and value and a slice for
// each name.
func copyFields(hdr http.Header, fields []h1.Field, length int64) {
	n, size := 0, 0
	for i := range fields {
		if f := &fields[i]; !f.Hop {
			n++
			size += len(f.Name) + len(f.Value)
		}
	}
	if length >= 0 {
		n++
		size += 20 // the longest int64
	}
	if n == 0 {
		return
	}
	b := make([]byte, 0, size)
	for i := range fields {
		if f := &fields[i]; !f.Hop {
			b = append(append(b, f.Name...), f.Value...)
		}
	}
	if length >= 0 {
		b = strconv.AppendInt(b, length, 10)
	}
	all := unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
	vals := make([]string, n)
	at, k := 0, 0
	add := func(name, value string) {
		vals[k] = value
		if old, ok := hdr[name]; ok {
			hdr[name] = append(old, value)
		} else {
			hdr[name] = vals[k : k+1 : k+1] // append copies rather than overwrite the next key's value
		}
		k++
	}
	for i := range fields {
		if f := &fields[i]; !f.Hop {
			name := textproto.CanonicalMIMEHeaderKey(all[at : at+len(f.Name)])
			at += len(f.Name)
			add(name, all[at:at+len(f.Value)])
			at += len(f.Value)
		}
	}
	if length >= 0 {
		hdr.Del("Content-Length")
		add("Content-Length", all[at:])
	}
}

// flushWriter flushes after every write, so bytes reach the client as the
// backend sends them, except after the write that completes a body of
// known length: the server sends that with the end of the response, in
// one write (over HTTP/2, HEADERS and DATA ending the stream together
// instead of a flushed DATA frame and an empty one after it).
type flushWriter struct {
	w    io.Writer
	rc   *http.ResponseController
	left int64 // body bytes still to come; -1: unknown
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if f.left >= 0 {
		f.left -= int64(n)
	}
	if err == nil && f.left != 0 {
		err = f.rc.Flush()
		if errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	return n, err
}

// growStack makes the stream's goroutine grow its stack here, near the top
// of a short stack, instead of deep in the core, where growing copies
// twice the frames.
//
//go:noinline
func growStack(i int) byte {
	var pad [2560]byte
	pad[i] = 1
	return pad[i/2]
}
