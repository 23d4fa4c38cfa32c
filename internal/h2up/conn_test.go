package h2up

import (
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// echo answers with the request's method and path, its body echoed, and
// trailers.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Trailer", "X-Sum")
	w.Header().Set("X-Path", r.URL.Path)
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Req-Trailer", r.Trailer.Get("X-Req-T"))
	w.WriteHeader(200)
	w.Write(body)
	w.Header().Set("X-Sum", strconv.Itoa(len(body)))
}

func TestRoundTripH2C(t *testing.T) {
	addr := h2cServer(t, &http2.Server{}, http.HandlerFunc(echo))
	c := dial(t, addr, Options{Name: "b1"})
	roundTrips(t, c)
}

func TestRoundTripTLS(t *testing.T) {
	addr, cfg := tlsServer(t, http.HandlerFunc(echo))
	tc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q", p)
	}
	c, err := Start(tc, Options{Name: "tls"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); <-c.Done() }()
	roundTrips(t, c)
}

// roundTrips sends requests in parallel, with bodies and trailers, and
// checks every answer and that every place is given back.
func roundTrips(t *testing.T, c *Conn) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s *Stream
			for s == nil {
				if s = c.Open(); s == nil {
					time.Sleep(time.Millisecond)
				}
			}
			defer s.Close()
			body := strings.Repeat("x", i*5000)
			if err := s.WriteHead(append(post("/p"+strconv.Itoa(i)), hpack.HeaderField{Name: "trailer", Value: "x-req-t"}), false); err != nil {
				errs <- "WriteHead: " + err.Error()
				return
			}
			s.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if n, err := s.Write([]byte(body)); err != nil || n != len(body) {
				errs <- "Write: " + err.Error()
				return
			}
			if err := s.CloseWrite([]hpack.HeaderField{{Name: "x-req-t", Value: "tv"}}); err != nil {
				errs <- "CloseWrite: " + err.Error()
				return
			}
			s.SetReadDeadline(time.Now().Add(10 * time.Second))
			h, err := s.ReadHead()
			if err != nil {
				errs <- "ReadHead: " + err.Error()
				return
			}
			if h.Status != 200 || field(h.Fields, "x-path") != "/p"+strconv.Itoa(i) || field(h.Fields, "x-req-trailer") != "tv" || h.End {
				errs <- "head: " + strconv.Itoa(h.Status) + " " + field(h.Fields, "x-path")
				return
			}
			got, err := readAll(t, s)
			if err != nil || string(got) != body {
				errs <- "body: " + strconv.Itoa(len(got)) + " bytes, " + errString(err)
				return
			}
			if tr := s.Trailers(); field(tr, "x-sum") != strconv.Itoa(len(body)) {
				errs <- "trailers: " + field(tr, "x-sum")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := c.Streams(); n != 0 {
		t.Errorf("Streams() = %d after every stream closed", n)
	}
	if !c.Usable() || c.IdleSince().IsZero() {
		t.Errorf("connection not usable and idle: %v %v", c.Usable(), c.IdleSince())
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A head with END_STREAM is a head with End; content-length is parsed;
// 1xx heads come first.
func TestHeads(t *testing.T) {
	addr := h2cServer(t, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(204)
		case "/len":
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("hello"))
		case "/early":
			w.Header().Set("Link", "</x>")
			w.WriteHeader(103)
			w.Header().Del("Link")
			w.Write([]byte("final"))
		}
	}))
	c := dial(t, addr, Options{})
	do := func(path string) (*Stream, Head) {
		s := c.Open()
		if err := s.WriteHead(get(path), true); err != nil {
			t.Fatal(err)
		}
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		h, err := s.ReadHead()
		if err != nil {
			t.Fatal(err)
		}
		return s, h
	}
	s, h := do("/empty")
	if h.Status != 204 || !h.End || h.ContentLength != -1 {
		t.Errorf("/empty: %+v", h)
	}
	if n, err := s.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("/empty Read: %d %v", n, err)
	}
	s.Close()
	s, h = do("/len")
	if h.Status != 200 || h.End || h.ContentLength != 5 {
		t.Errorf("/len: %+v", h)
	}
	if b, err := readAll(t, s); string(b) != "hello" || err != nil {
		t.Errorf("/len body %q %v", b, err)
	}
	s.Close()
	s, h = do("/early")
	if h.Status != 103 || field(h.Fields, "link") != "</x>" {
		t.Errorf("/early first head: %+v", h)
	}
	h, err := s.ReadHead()
	if err != nil || h.Status != 200 {
		t.Errorf("/early final head: %+v %v", h, err)
	}
	if b, err := readAll(t, s); string(b) != "final" || err != nil {
		t.Errorf("/early body %q %v", b, err)
	}
	s.Close()
	if c.Streams() != 0 {
		t.Errorf("Streams() = %d", c.Streams())
	}
}

// A stream's two sides at once: the backend echoes the request body as it
// arrives, and relay reads the echo while it still writes.
func TestFullDuplex(t *testing.T) {
	addr := h2cServer(t, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		buf := make([]byte, 8192)
		for {
			n, err := r.Body.Read(buf)
			w.Write(buf[:n])
			w.(http.Flusher).Flush()
			if err != nil {
				return
			}
		}
	}))
	// Windows smaller than the body: neither side can finish alone.
	c := dial(t, addr, Options{StreamWindow: 16384})
	s := c.Open()
	defer s.Close()
	if err := s.WriteHead(post("/"), false); err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("0123456789", 100000))
	wrote := make(chan error, 1)
	go func() {
		s.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := s.Write(body); err != nil {
			wrote <- err
			return
		}
		wrote <- s.CloseWrite(nil)
	}()
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := s.ReadHead(); err != nil || h.Status != 200 {
		t.Fatalf("%+v %v", h, err)
	}
	got, err := readAll(t, s)
	if err != nil || string(got) != string(body) {
		t.Fatalf("echo: %d bytes of %d, %v", len(got), len(body), err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// A request head larger than a frame goes out as HEADERS and
// CONTINUATION frames; DATA frames grow to the backend's
// SETTINGS_MAX_FRAME_SIZE and no further.
func TestLargeHeadAndFrameSize(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 20000},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	f.write(func() { f.fr.WriteWindowUpdate(0, 1<<20) })
	s := c.Open()
	defer s.Close()
	big := strings.Repeat("h", 50000)
	if err := s.WriteHead(append(post("/"), hpack.HeaderField{Name: "x-big", Value: big}), false); err != nil {
		t.Fatal(err)
	}
	h := f.until("HEADERS", isHeaders).(*http2.MetaHeadersFrame)
	if field(h.Fields, "x-big") != big || field(h.Fields, ":path") != "/" {
		t.Fatal("large head not received whole")
	}
	s.SetWriteDeadline(time.Now().Add(10 * time.Second))
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 100000))
		wrote <- err
	}()
	got, largest := 0, 0
	for got < 100000 {
		if d, ok := f.next().(*http2.DataFrame); ok {
			got += len(d.Data())
			largest = max(largest, len(d.Data()))
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if largest != 20000 {
		t.Fatalf("largest DATA frame %d, want the backend's 20000", largest)
	}
}
