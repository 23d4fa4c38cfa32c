package compress

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

var codings = []Encoding{Gzip, Brotli, Zstd}

// compressBody runs body through an encoder of p for e the way the core
// will: writes of uneven sizes as reads from a backend come, a flush
// after some, the output drained after every call, sometimes only in
// part, as a client's window allows.
func compressBody(t testing.TB, p *Policy, e Encoding, body []byte) []byte {
	t.Helper()
	enc := p.Encoder(e)
	if enc == nil {
		t.Fatalf("Encoder(%v) = nil", e)
	}
	defer enc.Release()
	if enc.Coding() != e {
		t.Fatalf("Encoder(%v).Coding() = %v", e, enc.Coding())
	}
	var got []byte
	drain := func(all bool) {
		out := enc.Output()
		n := len(out)
		if !all {
			n /= 2
		}
		got = append(got, out[:n]...)
		enc.Consume(n)
	}
	sizes := []int{1, 100, 4096, 7 << 10, 33 << 10, 16 << 10, 2, 64 << 10}
	for i := 0; len(body) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(body))
		if w, err := enc.Write(body[:n]); err != nil || w != n {
			t.Fatalf("%v: Write(%d bytes) = %d, %v", e, n, w, err)
		}
		body = body[n:]
		drain(i%2 == 0)
		if i%3 == 1 {
			if err := enc.Flush(); err != nil {
				t.Fatalf("%v: Flush: %v", e, err)
			}
			drain(true)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatalf("%v: Close: %v", e, err)
	}
	drain(true)
	if len(enc.Output()) != 0 {
		t.Fatalf("%v: %d bytes of output left after draining", e, len(enc.Output()))
	}
	return got
}

// decodeLib decodes with the Go libraries (gzip twice: klauspost's and
// the standard library's, an independent implementation).
func decodeLib(e Encoding, data []byte) ([]byte, error) {
	switch e {
	case Gzip:
		r, err := stdgzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		std, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("compress/gzip: %w", err)
		}
		kr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		k, err := io.ReadAll(kr)
		if err != nil {
			return nil, fmt.Errorf("klauspost gzip: %w", err)
		}
		if !bytes.Equal(std, k) {
			return nil, errors.New("the two gzip decoders disagree")
		}
		return std, nil
	case Brotli:
		return io.ReadAll(brotli.NewReader(bytes.NewReader(data)))
	case Zstd:
		d, err := zstd.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return io.ReadAll(d)
	}
	return nil, fmt.Errorf("no decoder for %v", e)
}

// cli is the Debian command that decodes each coding from stdin.
var cli = map[Encoding][]string{
	Gzip:   {"gzip", "-d", "-c"},
	Brotli: {"brotli", "-d", "-c"},
	Zstd:   {"zstd", "-d", "-c", "-q"},
}

// decodeCLI decodes with the coding's reference command-line tool. A
// missing tool fails the test: CI installs them (.ci/run), and a
// skipped check of what clients will decode is no check.
func decodeCLI(t testing.TB, e Encoding, data []byte) []byte {
	t.Helper()
	args := cli[e]
	path, err := exec.LookPath(args[0])
	if err != nil {
		t.Fatalf("%s is needed to check %v output against the reference decoder (apt-get install %s): %v", args[0], e, args[0], err)
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", args, err, stderr.Bytes())
	}
	return out
}

func testBodies() map[string][]byte {
	return map[string][]byte{
		"html 100 KB": htmlBody(100 << 10),
		"json 200 KB": jsonBody(200 << 10),
	}
}

func TestRoundTrip(t *testing.T) {
	p := mustNew(t, Config{})
	for name, body := range testBodies() {
		for _, e := range codings {
			t.Run(name+"/"+e.String(), func(t *testing.T) {
				data := compressBody(t, p, e, body)
				if len(data) >= len(body)/3 {
					t.Errorf("%v made %d bytes of %d; text compresses better than that", e, len(data), len(body))
				}
				got, err := decodeLib(e, data)
				if err != nil {
					t.Fatalf("decoding: %v", err)
				}
				if !bytes.Equal(got, body) {
					t.Fatalf("decoded %d bytes, not the %d written", len(got), len(body))
				}
			})
		}
	}
}

func TestRoundTripCLI(t *testing.T) {
	p := mustNew(t, Config{})
	for name, body := range testBodies() {
		for _, e := range codings {
			t.Run(name+"/"+e.String(), func(t *testing.T) {
				data := compressBody(t, p, e, body)
				if got := decodeCLI(t, e, data); !bytes.Equal(got, body) {
					t.Fatalf("%s decoded %d bytes, not the %d written", cli[e][0], len(got), len(body))
				}
			})
		}
	}
}

// TestRoundTripLevels takes every level through the reference tools: a
// level an operator may configure must produce what clients decode.
func TestRoundTripLevels(t *testing.T) {
	body := jsonBody(100 << 10)
	var configs []Config
	for l := 1; l <= 9; l++ {
		configs = append(configs, Config{Encodings: []string{"gzip"}, GzipLevel: l})
	}
	for l := 1; l <= 11; l++ {
		configs = append(configs, Config{Encodings: []string{"br"}, BrotliLevel: l})
	}
	for _, l := range zstdLevels {
		configs = append(configs, Config{Encodings: []string{"zstd"}, ZstdLevel: l.name})
	}
	for _, c := range configs {
		p := mustNew(t, c)
		e := p.Encodings()[0]
		c = p.Config()
		t.Run(fmt.Sprintf("%v/%d/%s", e, map[Encoding]int{Gzip: c.GzipLevel, Brotli: c.BrotliLevel}[e], map[Encoding]string{Zstd: c.ZstdLevel}[e]), func(t *testing.T) {
			data := compressBody(t, p, e, body)
			if got := decodeCLI(t, e, data); !bytes.Equal(got, body) {
				t.Fatalf("%s decoded %d bytes, not the %d written", cli[e][0], len(got), len(body))
			}
		})
	}
}

// TestEmptyBody: a body of unknown length may turn out empty, and its
// compressed form must still be a stream the client decodes.
func TestEmptyBody(t *testing.T) {
	p := mustNew(t, Config{})
	for _, e := range codings {
		t.Run(e.String(), func(t *testing.T) {
			enc := p.Encoder(e)
			defer enc.Release()
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			data := bytes.Clone(enc.Output())
			if len(data) == 0 {
				t.Fatal("no output for an empty body")
			}
			if got, err := decodeLib(e, data); err != nil || len(got) != 0 {
				t.Fatalf("decoded %q, %v", got, err)
			}
			if got := decodeCLI(t, e, data); len(got) != 0 {
				t.Fatalf("%s decoded %q", cli[e][0], got)
			}
		})
	}
}

// TestFlush: after Write and Flush, what Output holds decodes, in a
// streaming decoder that waits for more, to everything written so far,
// so a streamed response's part reaches the client without waiting for
// the next.
func TestFlush(t *testing.T) {
	p := mustNew(t, Config{})
	parts := [][]byte{
		[]byte("data: first event\n\n"),
		htmlBody(3000),
		jsonBody(70 << 10), // more than zstd's 64 KiB block
		[]byte("x"),
	}
	for _, e := range codings {
		t.Run(e.String(), func(t *testing.T) {
			enc := p.Encoder(e)
			defer enc.Release()
			pr, pw := io.Pipe()
			defer pw.Close()
			type result struct {
				r   io.Reader
				err error
			}
			opened := make(chan result, 1)
			go func() {
				// The readers read their header as they open, from the
				// pipe, so they open beside the writes.
				var r io.Reader
				var err error
				switch e {
				case Gzip:
					r, err = stdgzip.NewReader(pr)
				case Brotli:
					r = brotli.NewReader(pr)
				case Zstd:
					var d *zstd.Decoder
					d, err = zstd.NewReader(pr, zstd.WithDecoderConcurrency(1))
					r = d
				}
				opened <- result{r, err}
			}()
			written := make(chan error, 1)
			var r io.Reader
			for i, part := range parts {
				if _, err := enc.Write(part); err != nil {
					t.Fatal(err)
				}
				if err := enc.Flush(); err != nil {
					t.Fatal(err)
				}
				out := bytes.Clone(enc.Output())
				enc.Consume(len(out))
				go func() {
					_, err := pw.Write(out)
					written <- err
				}()
				if r == nil {
					res := <-opened
					if res.err != nil {
						t.Fatal(res.err)
					}
					r = res.r
				}
				got := make([]byte, len(part))
				read := make(chan error, 1)
				go func() {
					_, err := io.ReadFull(r, got)
					read <- err
				}()
				select {
				case err := <-read:
					if err != nil {
						t.Fatalf("part %d: reading %d bytes: %v", i, len(part), err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("part %d: the decoder still waits for more after a flush", i)
				}
				if !bytes.Equal(got, part) {
					t.Fatalf("part %d: decoded %.40q, want %.40q", i, got, part)
				}
				if err := <-written; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestEncoderAfterClose(t *testing.T) {
	p := mustNew(t, Config{})
	for _, e := range codings {
		t.Run(e.String(), func(t *testing.T) {
			enc := p.Encoder(e)
			defer enc.Release()
			if _, err := enc.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			n := len(enc.Output())
			if err := enc.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := enc.Write([]byte("more")); err == nil {
				t.Error("Write after Close did not fail")
			}
			if err := enc.Flush(); err == nil {
				t.Error("Flush after Close did not fail")
			}
			if len(enc.Output()) != n {
				t.Errorf("output grew from %d to %d bytes after Close", n, len(enc.Output()))
			}
		})
	}
}

func TestEncoderNone(t *testing.T) {
	p := mustNew(t, Config{Encodings: []string{"gzip"}})
	for _, e := range []Encoding{Identity, Brotli, Zstd, Encoding(7)} {
		if enc := p.Encoder(e); enc != nil {
			t.Errorf("Encoder(%v) of a gzip-only policy = %v, want nil", e, enc)
		}
	}
	var nilEnc *Encoder
	nilEnc.Release() // a core that got nil may release it all the same
}

func TestConsume(t *testing.T) {
	p := mustNew(t, Config{})
	enc := p.Encoder(Gzip)
	defer enc.Release()
	enc.Write(htmlBody(5000))
	enc.Flush()
	out := bytes.Clone(enc.Output())
	enc.Consume(10)
	if !bytes.Equal(enc.Output(), out[10:]) {
		t.Fatal("Consume(10) did not drop the first 10 bytes")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Consume beyond Output did not panic")
			}
		}()
		enc.Consume(len(out))
	}()
	enc.Consume(len(out) - 10)
	if len(enc.Output()) != 0 {
		t.Fatalf("%d bytes left after consuming all", len(enc.Output()))
	}
}

// TestEncoderReuse: an encoder back from its pool starts a new stream,
// whatever the last one left (an unclosed stream of a client that went
// away, output not consumed, a large output buffer).
func TestEncoderReuse(t *testing.T) {
	p := mustNew(t, Config{})
	body := htmlBody(20 << 10)
	for _, e := range codings {
		t.Run(e.String(), func(t *testing.T) {
			for i := range 5 {
				enc := p.Encoder(e)
				switch i {
				case 1: // abandoned midway
					enc.Write(body[:7000])
					enc.Flush()
					enc.Release()
					continue
				case 2: // output never drained, beyond what the pool keeps
					enc.Write(jsonBody(400 << 10))
					enc.Close()
					if cap(enc.out.buf) <= MaxPooledOutput {
						t.Fatalf("test output of %d bytes too small", cap(enc.out.buf))
					}
					enc.Release()
					if enc.out.buf != nil {
						t.Errorf("an output buffer of more than %d bytes went back to the pool", MaxPooledOutput)
					}
					continue
				}
				enc.Release()
				data := compressBody(t, p, e, body)
				if got, err := decodeLib(e, data); err != nil || !bytes.Equal(got, body) {
					t.Fatalf("round %d: %d bytes decoded, %v", i, len(got), err)
				}
			}
		})
	}
}

// TestPoolsShared: policies at the same levels take encoders from one
// pool, so many routes do not multiply idle encoders.
func TestPoolsShared(t *testing.T) {
	a := mustNew(t, Config{GzipLevel: 3})
	b := mustNew(t, Config{GzipLevel: 3, Encodings: []string{"gzip"}})
	c := mustNew(t, Config{GzipLevel: 4})
	if a.pools[Gzip] != b.pools[Gzip] {
		t.Error("two policies with gzip level 3 have separate pools")
	}
	if a.pools[Gzip] == c.pools[Gzip] {
		t.Error("gzip levels 3 and 4 share a pool")
	}
}

func TestEncoderConcurrent(t *testing.T) {
	p := mustNew(t, Config{})
	body := jsonBody(30 << 10)
	done := make(chan error)
	const workers = 8
	for w := range workers {
		go func() {
			var err error
			for i := range 10 {
				e := codings[(w+i)%len(codings)]
				enc := p.Encoder(e)
				enc.Write(body)
				enc.Close()
				got, derr := decodeLib(e, enc.Output())
				if derr != nil || !bytes.Equal(got, body) {
					err = fmt.Errorf("%v: %d bytes decoded, %v", e, len(got), derr)
				}
				enc.Release()
			}
			done <- err
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// responseAllocs is the allocations of one compressed response in steady
// state: an encoder from the pool, a body in three writes with a flush,
// the output drained into the caller's buffer, the encoder released.
// Under the race detector, whose sync.Pool drops encoders on purpose, it
// counts one encoder's reuse for a new stream without the pool.
func responseAllocs(p *Policy, e Encoding, body []byte) float64 {
	sent := make([]byte, 0, len(body))
	kept := p.Encoder(e)
	defer kept.Release()
	run := func() {
		enc := kept
		if raceEnabled {
			enc.reset()
		} else {
			enc = p.Encoder(e)
		}
		third := len(body) / 3
		for i, part := range [][]byte{body[:third], body[third : 2*third], body[2*third:]} {
			enc.Write(part)
			if i == 1 {
				enc.Flush()
			}
			sent = append(sent[:0], enc.Output()...)
			enc.Consume(len(enc.Output()))
		}
		enc.Close()
		enc.Consume(len(enc.Output()))
		if !raceEnabled {
			enc.Release()
		}
	}
	run()
	return testing.AllocsPerRun(50, run)
}

func TestEncoderAllocs(t *testing.T) {
	p := mustNew(t, Config{})
	tests := []struct {
		name string
		e    Encoding
		body []byte
		max  float64
		// libraryPools: the library keeps scratch state in pools of its
		// own, which the race detector empties at random.
		libraryPools bool
	}{
		{name: "gzip", e: Gzip, body: htmlBody(100 << 10), max: 0},
		{name: "br", e: Brotli, body: htmlBody(100 << 10), max: 0, libraryPools: true},
		// klauspost/compress's zstd writes a stream's frame header from
		// an array on its stack through an io.Writer, which moves the
		// array to the heap: one allocation of 24 bytes in every stream
		// that flushes or outgrows one block. Nothing outside the
		// library avoids it.
		{name: "zstd", e: Zstd, body: htmlBody(100 << 10), max: 1},
		{name: "zstd one block", e: Zstd, body: htmlBody(20 << 10), max: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := responseAllocs(p, tt.e, tt.body)
			t.Logf("a %v response of %d bytes: %.1f allocations", tt.e, len(tt.body), got)
			if raceEnabled && tt.libraryPools {
				return // counted without the race detector, as CI's benchmarks run
			}
			if got > tt.max {
				t.Errorf("a %v response of %d bytes allocates %.1f times, want at most %.0f", tt.e, len(tt.body), got, tt.max)
			}
		})
	}
}

// encoderBytes measures what an encoder for key holds once it has
// compressed a body larger than its window: its windows, tables and
// buffers, the output buffer left out (Release bounds that apart).
func encoderBytes(key poolKey, n int) uint64 {
	body := htmlBody(300 << 10)
	var before, after runtime.MemStats
	encs := make([]*Encoder, n)
	// Two collections empty every sync.Pool, victim caches included, so
	// that encoders pooled by other tests, freed between the readings,
	// do not count against these.
	settle := func(m *runtime.MemStats) {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(m)
	}
	settle(&before)
	for i := range encs {
		enc, err := newEncoder(key, nil)
		if err != nil {
			panic(err)
		}
		enc.reset()
		for off := 0; off < len(body); off += 16 << 10 {
			enc.Write(body[off:min(off+16<<10, len(body))])
			if off%(64<<10) == 0 {
				enc.Flush()
			}
			enc.Consume(len(enc.Output()))
		}
		enc.Close()
		enc.out.buf = nil
		encs[i] = enc
	}
	settle(&after)
	runtime.KeepAlive(encs)
	runtime.KeepAlive(body)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}

// TestEncoderMemory measures one encoder at the default levels and holds
// it to the figures the package documentation states, so that a library
// upgrade that grows them is noticed. BenchmarkEncoderMemory measures
// every level.
func TestEncoderMemory(t *testing.T) {
	tests := []struct {
		name  string
		key   poolKey
		limit uint64 // the package doc's figure, rounded up
	}{
		{name: "gzip 5", key: poolKey{Gzip, DefaultGzipLevel}, limit: 1100 << 10},
		{name: "br 4", key: poolKey{Brotli, DefaultBrotliLevel}, limit: 2200 << 10},
		{name: "zstd fastest", key: poolKey{Zstd, int(zstd.SpeedFastest)}, limit: 950 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encoderBytes(tt.key, 4)
			t.Logf("%s: %d KiB per encoder", tt.name, got>>10)
			if got > tt.limit {
				t.Errorf("%s holds %d KiB per encoder, more than the %d KiB documented", tt.name, got>>10, tt.limit>>10)
			}
		})
	}
}
