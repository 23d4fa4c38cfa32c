package logging

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// benchEntry is a typical request: a short path, a named backend.
func benchEntry() *Entry {
	return &Entry{
		Time:     time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.Local),
		Client:   netip.MustParseAddrPort("10.1.2.3:51234"),
		Method:   []byte("GET"),
		Path:     []byte("/api/v1/items?id=42&sort=desc"),
		Status:   200,
		Backend:  "http://127.0.0.1:8001",
		Duration: 734 * time.Microsecond,
		BytesOut: 5120,

		UserAgent:        []byte("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"),
		RequestID:        []byte("5f0c3e1a9b2d4c67000000000000002a"),
		UpstreamConnect:  0,
		UpstreamResponse: 612 * time.Microsecond,
	}
}

// BenchmarkAppendEntry is the formatting alone.
func BenchmarkAppendEntry(b *testing.B) {
	e := benchEntry()
	buf := make([]byte, 0, 512)
	var f lineFormatter
	b.ReportAllocs()
	for b.Loop() {
		e.Time = e.Time.Add(time.Microsecond)
		buf = f.appendEntry(buf[:0], e)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendCombined is the combined format's formatting alone.
func BenchmarkAppendCombined(b *testing.B) {
	e := benchEntry()
	buf := make([]byte, 0, 512)
	f := lineFormatter{format: Combined}
	b.ReportAllocs()
	for b.Loop() {
		e.Time = e.Time.Add(time.Microsecond)
		buf = f.appendLine(buf[:0], e)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkSlogAccessLine is the same line through slog's JSON handler, for
// comparison with BenchmarkAppendEntry: it is why the access log formats by
// hand.
func BenchmarkSlogAccessLine(b *testing.B) {
	e := benchEntry()
	l := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.LogAttrs(ctx, slog.LevelInfo, "access",
			slog.String("client", e.Client.String()),
			slog.String("method", string(e.Method)),
			slog.String("path", string(e.Path)),
			slog.Int("status", e.Status),
			slog.String("backend", e.Backend),
			slog.String("pool", e.Pool),
			slog.String("route", e.Route),
			slog.Float64("duration_ms", float64(e.Duration.Round(time.Microsecond)/time.Microsecond)/1000),
			slog.Int64("bytes_in", e.BytesIn),
			slog.Int64("bytes_out", e.BytesOut),
			slog.String("user_agent", string(e.UserAgent)),
			slog.String("referer", string(e.Referer)),
			slog.String("request_id", string(e.RequestID)),
			slog.Float64("upstream_connect_ms", float64(e.UpstreamConnect.Round(time.Microsecond)/time.Microsecond)/1000),
			slog.Float64("upstream_response_ms", float64(e.UpstreamResponse.Round(time.Microsecond)/time.Microsecond)/1000),
		)
	}
}

// yieldEvery is how many lines a benchmark goroutine logs before letting
// other goroutines run. A proxy goroutine blocks on the network between
// requests, which is when the flusher gets a processor; a loop that only logs
// never blocks, so without this the flusher could starve until preemption
// and the figures would measure dropped lines instead of logged ones.
const yieldEvery = 128

// BenchmarkAccessLog measures Log as the proxy calls it, with the background
// writer running, from one goroutine and from all of them at once. dropped/op
// should stay 0: a dropped line is cheaper than a logged one and would flatter
// the result.
func BenchmarkAccessLog(b *testing.B) {
	b.Run("single", func(b *testing.B) {
		a := NewAccessLog(io.Discard)
		defer a.Close()
		e := benchEntry()
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			e.Time = e.Time.Add(time.Microsecond)
			a.Log(e)
			if n++; n%yieldEvery == 0 {
				runtime.Gosched()
			}
		}
		b.ReportMetric(float64(a.Dropped())/float64(b.N), "dropped/op")
	})
	b.Run("parallel", func(b *testing.B) {
		a := NewAccessLog(io.Discard)
		defer a.Close()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			e := benchEntry()
			n := 0
			for pb.Next() {
				e.Time = e.Time.Add(time.Microsecond)
				a.Log(e)
				if n++; n%yieldEvery == 0 {
					runtime.Gosched()
				}
			}
		})
		b.ReportMetric(float64(a.Dropped())/float64(b.N), "dropped/op")
	})
}
