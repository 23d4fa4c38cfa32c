package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/core"
	"relay/internal/logging"
	"relay/internal/ratelimit"
	"relay/internal/route"
	"relay/internal/trace"
)

// BenchmarkRequestPath measures relay's whole request path with no system
// calls: a client connection that replays one keep-alive request b.N times
// and an upstream that answers each request it is sent. What remains is
// parsing both heads, picking, pooling, building the upstream request with
// X-Forwarded-* and Via, and building the client response. "via" is a
// request that came through another proxy: its Via entry is checked for
// relay's own and forwarded before relay's. "request-id" makes an
// X-Request-Id for each request, sends it on and returns it (relay's
// default); "+log" also writes the access line, with its upstream times.
// Its B/op is the access log's buffer growing while the log's writer
// goroutine waits for a processor beside this loop, which never blocks
// as a served connection does (logging.yieldEvery says more); it stays at
// 0 allocs/op. "routes/N" puts a route table of N host and path prefix
// rules in front of the pool, as a large ingress has (route.Table): the
// request's route is found through the host index, its target normalised
// and forwarded. "header-key" hashes a request header (hash_key:
// header:X-User) in place; "+bound" adds hash_balance_factor: 125, which
// reads every member's in-flight count on each pick. "grpc+log" is a
// gRPC call whose answer's head carries grpc-status, logged and counted.
// "tracing/unsampled" turns tracing on at sample 0 for a request with a
// sampled traceparent (honour_parent off): the field is read, two ids are
// drawn and relay's traceparent is written, at 0 allocs/op; "+log" also
// writes the trace id in the access line. "tracing/sampled" at sample 1
// fills a span for every request and hands it to an exporter that drops
// it: the copies of the head's parts the span keeps are its allocations.
func BenchmarkRequestPath(b *testing.B) {
	b.Run("round-robin/3", func(b *testing.B) { benchRequestPath(b, "round-robin", 3, "") })
	b.Run("least-conn/3", func(b *testing.B) { benchRequestPath(b, "least-conn", 3, "") })
	b.Run("ip-hash/1000", func(b *testing.B) { benchRequestPath(b, "ip-hash", 1000, "") })
	b.Run("ip-hash/3/header-key", func(b *testing.B) {
		benchRequestPath(b, "ip-hash", 3, "X-User: alice@example.com\r\n", withHashKey(0))
	})
	b.Run("ip-hash/3/header-key+bound", func(b *testing.B) {
		benchRequestPath(b, "ip-hash", 3, "X-User: alice@example.com\r\n", withHashKey(125))
	})
	b.Run("round-robin/3/via", func(b *testing.B) { benchRequestPath(b, "round-robin", 3, "Via: 1.1 edge-proxy\r\n") })
	b.Run("round-robin/3/request-id", func(b *testing.B) {
		benchRequestPath(b, "round-robin", 3, "", func(c *Config) { c.RequestID = true })
	})
	b.Run("round-robin/3/request-id+log", func(b *testing.B) {
		log := logging.NewAccessLog(io.Discard)
		defer log.Close()
		benchRequestPath(b, "round-robin", 3, "Referer: https://example.com/\r\n", func(c *Config) { c.RequestID, c.AccessLog = true, log })
	})
	// A gRPC call (its content-type) whose answer carries grpc-status:
	// read from the head, counted by status and in the access line.
	b.Run("round-robin/3/grpc+log", func(b *testing.B) {
		log := logging.NewAccessLog(io.Discard)
		defer log.Close()
		benchRequestPath(b, "round-robin", 3, "Content-Type: application/grpc\r\nTE: trailers\r\n", func(c *Config) {
			c.RequestID, c.AccessLog = true, log
			c.respFields = "Grpc-Status: 0\r\n"
		})
	})
	b.Run("round-robin/3/tracing/unsampled", func(b *testing.B) {
		benchRequestPath(b, "round-robin", 3, benchTraceparent, withTracing(0))
	})
	b.Run("round-robin/3/tracing/unsampled+log", func(b *testing.B) {
		log := logging.NewAccessLog(io.Discard)
		defer log.Close()
		benchRequestPath(b, "round-robin", 3, benchTraceparent, withTracing(0), func(c *Config) { c.RequestID, c.AccessLog = true, log })
	})
	b.Run("round-robin/3/tracing/sampled", func(b *testing.B) {
		benchRequestPath(b, "round-robin", 3, benchTraceparent, withTracing(1))
	})
	b.Run("round-robin/3/routes/1", func(b *testing.B) { benchRequestPath(b, "round-robin", 3, "", withRoutes(b, 1)) })
	b.Run("round-robin/3/routes/1000", func(b *testing.B) { benchRequestPath(b, "round-robin", 3, "", withRoutes(b, 1000)) })
	b.Run("round-robin/3/routes/1/headers", func(b *testing.B) {
		h := core.NewHeaderChanges(
			route.HeaderOps{Set: []route.KV{{Name: "X-Env", Value: "bench"}}, Add: []route.KV{{Name: "X-Tag", Value: "a"}}, Remove: []string{"User-Agent"}},
			route.HeaderOps{Set: []route.KV{{Name: "Server", Value: "relay"}}, Remove: []string{"Date"}})
		benchRequestPath(b, "round-robin", 3, "", withRoutes(b, 1, h), func(c *Config) {
			c.respExtra = len("Server: relay\r\n") - len("Server: nginx\r\n") - len("Date: Sun, 22 Nov 2026 03:00:00 GMT\r\n")
		})
	})
	// A rate limit per client address that never refuses: the table
	// lookup and the bucket on every request.
	b.Run("round-robin/3/rate-limit", func(b *testing.B) {
		benchRequestPath(b, "round-robin", 3, "", func(c *Config) {
			c.Pool.RateLimit = &core.RateLimit{Spec: ratelimit.Spec{Rate: 1 << 30, Burst: 1 << 30}, Key: core.RateByClient}
		})
	})
	// Sticky sessions: every request's cookie names the first backend,
	// which takes it; "new": no request has a cookie, and every response
	// gets Set-Cookie.
	b.Run("round-robin/3/sticky", func(b *testing.B) {
		v := core.StickyValue(benchStickyKey, testPool, "http://10.0.0.1:1000")
		benchRequestPath(b, "round-robin", 3, "Cookie: theme=dark; SRV="+v+"\r\n", withSticky(false))
	})
	b.Run("round-robin/3/sticky/new", func(b *testing.B) { benchRequestPath(b, "round-robin", 3, "", withSticky(true)) })
	// "+indirect" writes the request's Cookie field without SRV;
	// "+nocache" adds Cache-Control: private beside each Set-Cookie,
	// "/merge" adds private to the backend's Cache-Control.
	b.Run("round-robin/3/sticky+indirect", func(b *testing.B) {
		v := core.StickyValue(benchStickyKey, testPool, "http://10.0.0.1:1000")
		benchRequestPath(b, "round-robin", 3, "Cookie: theme=dark; SRV="+v+"; lang=en\r\n", withSticky(false),
			func(c *Config) { c.Pool.Sticky.Indirect = true })
	})
	b.Run("round-robin/3/sticky/new+nocache", func(b *testing.B) {
		benchRequestPath(b, "round-robin", 3, "", withSticky(true), func(c *Config) {
			c.Pool.Sticky.NoCache = true
			c.respExtra += len("Cache-Control: private\r\n")
		})
	})
	b.Run("round-robin/3/sticky/new+nocache/merge", func(b *testing.B) {
		benchRequestPath(b, "round-robin", 3, "", withSticky(true), func(c *Config) {
			c.Pool.Sticky.NoCache = true
			c.respFields = "Cache-Control: max-age=60\r\n"
			c.respExtra += len(", private")
		})
	})
}

var benchStickyKey = []byte("0123456789abcdef")

// benchTraceparent is a client's traceparent field, sampled.
const benchTraceparent = "Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"

// withTracing puts the tracing feature, sampling by ratio alone, among
// the core's own features as the data plane does: after request ids,
// before the access log, which then logs the trace id. Sampled spans go
// to an exporter that drops them.
func withTracing(ratio float64) func(*Config) {
	return func(c *Config) {
		c.features = func(cr *core.Core) []core.Feature {
			return core.CoreFeatures(cr, core.NewTracing(trace.Sampler{Ratio: ratio}, discardSpans{}))
		}
	}
}

// withSticky turns sticky cookies on; set says every response gets one.
func withSticky(set bool) func(*Config) {
	return func(c *Config) {
		c.Pool.Sticky = core.Sticky{Cookie: "SRV", Path: "/", HTTPOnly: true, SameSite: "Lax", Key: benchStickyKey}
		if set {
			c.respExtra = len("Set-Cookie: SRV=12345678901; Path=/; HttpOnly; SameSite=Lax\r\n")
		}
	}
}

// withHashKey hashes the X-User header (hash_key: header:X-User) with
// hash_balance_factor factor.
func withHashKey(factor int) func(*Config) {
	return func(c *Config) {
		c.Pool.HashKey = balance.KeySpec{Source: balance.FromHeader, Name: "x-user"}
		c.Pool.HashBalanceFactor = factor
	}
}

// withRoutes gives the benchmark's relay a route table of n rules, the
// last of which takes its requests (Host example.com, path prefix
// /index.html); the others are host and prefix rules for other services,
// a few with two prefixes, a few wildcards. fs are the last route's
// features.
func withRoutes(b *testing.B, n int, fs ...core.Feature) func(*Config) {
	specs := make([]route.Spec, 0, n)
	for i := 0; len(specs) < n-1; i++ {
		host := "svc" + itoa(i) + ".example.com"
		specs = append(specs, route.Spec{Hosts: []string{host}, PathPrefix: "/api", StripPrefix: true})
		if i%3 == 0 && len(specs) < n-1 {
			specs = append(specs, route.Spec{Hosts: []string{host}, PathPrefix: "/static/"})
		}
		if i%100 == 0 && len(specs) < n-1 {
			specs = append(specs, route.Spec{Hosts: []string{"*.zone" + itoa(i) + ".example.com"}})
		}
	}
	specs = append(specs, route.Spec{Hosts: []string{"example.com"}, PathPrefix: "/index.html"})
	t, err := route.New(specs, route.Reject)
	if err != nil {
		b.Fatal(err)
	}
	return func(c *Config) {
		c.routing = func(cr *core.Core) {
			p := cr.Pool(testPool)
			features := make([][]core.Feature, n)
			features[n-1] = fs
			cr.SetRouting(core.Routing{Table: t, Pools: []*core.Pool{p}, Features: features})
		}
	}
}

func benchRequestPath(b *testing.B, algorithm string, n int, fields string, with ...func(*Config)) {
	req := []byte("GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n" + fields + "\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 22 Nov 2026 03:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 29\r\nConnection: keep-alive\r\n\r\nHello World from 8001 server\n")
	var bs []*backend.Backend
	for i := 0; i < n; i++ {
		u, _ := url.Parse("http://10.0.0.1:" + itoa(1000+i))
		be, err := backend.New(u, 1)
		if err != nil {
			b.Fatal(err)
		}
		bs = append(bs, be)
	}
	cfg := withDefaults(Config{Pool: core.PoolConfig{
		Algorithm: algorithm,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return &memUpstream{resp: resp}, nil
		},
	}})
	// The benchmark runs connections without Serve, so it takes no
	// connection slots and must not give any back.
	cfg.MaxConnections = 0
	for _, w := range with {
		w(&cfg)
	}
	if cfg.respFields != "" {
		resp = []byte(strings.Replace(string(resp), "\r\n\r\n", "\r\n"+cfg.respFields+"\r\n", 1))
	}
	p, err := build(cfg, bs)
	if err != nil {
		b.Fatal(err)
	}
	if cfg.routing != nil {
		cfg.routing(p.core)
	}
	client := &memClient{req: req}
	cc := newClientConn(p, client, nil)
	// Warm up: one request per backend fills every pool.
	client.left = n
	cc.serve()
	client.left, client.written = b.N, 0
	cc = newClientConn(p, client, nil)
	b.ReportAllocs()
	b.ResetTimer()
	cc.serve()
	b.StopTimer()
	// Each response leaves out the upstream's Connection field, and
	// carries relay's X-Request-Id when ids are on.
	each := len(resp) - len("Connection: keep-alive\r\n")
	if cfg.RequestID {
		each += len("X-Request-Id: \r\n") + 32
	}
	each += cfg.respExtra
	if want := int64(b.N) * int64(each); client.written != want {
		b.Fatalf("client got %d bytes, want %d", client.written, want)
	}
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(buf[n:])
		}
	}
}

// memClient is a client connection that sends req left more times, one
// request per read, and swallows what it is sent.
type memClient struct {
	memConn
	req     []byte
	pos     int
	left    int
	written int64
}

func (c *memClient) Read(p []byte) (int, error) {
	if c.pos == len(c.req) || c.pos == 0 {
		if c.left == 0 {
			return 0, io.EOF
		}
		c.left--
		c.pos = 0
	}
	n := copy(p, c.req[c.pos:])
	c.pos += n
	if c.pos == len(c.req) {
		c.pos = 0
	}
	return n, nil
}

func (c *memClient) Write(p []byte) (int, error) {
	c.written += int64(len(p))
	return len(p), nil
}

func (c *memClient) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
}

// memUpstream answers every request written to it with resp.
type memUpstream struct {
	memConn
	resp    []byte
	pending int
}

func (u *memUpstream) Write(p []byte) (int, error) {
	u.pending++
	return len(p), nil
}

func (u *memUpstream) Read(p []byte) (int, error) {
	if u.pending == 0 {
		return 0, errors.New("memUpstream: read with no request outstanding")
	}
	u.pending--
	return copy(p, u.resp), nil
}

// memConn supplies the parts of net.Conn the benchmarks do not exercise.
type memConn struct{}

func (memConn) Close() error                     { return nil }
func (memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (memConn) SetDeadline(time.Time) error      { return nil }
func (memConn) SetReadDeadline(time.Time) error  { return nil }
func (memConn) SetWriteDeadline(time.Time) error { return nil }

// Tracing that does not sample a request costs it no allocation: the
// benchmark's "tracing/unsampled" case at 0 allocs/op, as a test. (Under
// the race detector sync.Pool drops items on purpose, so it is skipped.)
func TestTracingUnsampledAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	r := testing.Benchmark(func(b *testing.B) { benchRequestPath(b, "round-robin", 3, benchTraceparent, withTracing(0)) })
	if r.N == 0 {
		t.Fatal("the benchmark did not run")
	}
	if a := r.AllocsPerOp(); a != 0 {
		t.Fatalf("an unsampled request allocates %d times (%d B), want 0", a, r.AllocedBytesPerOp())
	}
}

// discardSpans takes sampled spans and keeps none.
type discardSpans struct{}

func (discardSpans) Export(*trace.Span) {}
func (discardSpans) Exported() uint64   { return 0 }
func (discardSpans) Dropped() uint64    { return 0 }
func (discardSpans) Failed() uint64     { return 0 }
