package dataplane

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"relay/internal/compress"
)

// BenchmarkCompressionHeldStreams measures what relay holds per HTTP/2
// stream whose client never reads its compressed response: 100 streams
// on one connection with a window of zero, each for a 1 MiB page, at
// each coding's default level, with the default encoder budget and with
// one of 32 MiB. It reports the Go heap relay grew by per stream, and
// how many of the streams were compressed. Run it once a case:
//
//	go test ./internal/dataplane -run '^$' -bench HeldStreams -benchtime 1x
func BenchmarkCompressionHeldStreams(b *testing.B) {
	var page bytes.Buffer
	for i := 0; page.Len() < 1<<20; i++ {
		fmt.Fprintf(&page, "<p id=\"p%d\">Paragraph %d of the page, with word %d and %x.</p>\n", i, i, i*7919%1000, i*31)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(page.Bytes())
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	const streams = 100
	for _, coding := range []string{"identity", "gzip", "br", "zstd"} {
		for _, limit := range []int64{0, 32 << 20} {
			name := coding + "/default-budget"
			if limit > 0 {
				name = fmt.Sprintf("%s/budget-%dMiB", coding, limit>>20)
			}
			b.Run(name, func(b *testing.B) {
				old := compress.SetEncoderMemory(limit)
				defer compress.SetEncoderMemory(old)
				r := startRelay(b, "backends: [http://"+ln.Addr().String()+"]\ncompress: {}\n", Options{})
				for b.Loop() {
					waitEncodersIdle(b)
					start := settledHeap()
					hold := holdStreams(b, r.addr)
					coded := 0
					for _, h := range hold.open(streams, "/page", coding) {
						if h.Get("content-encoding") != "" {
							coded++
						}
					}
					grown := settledHeap() - start
					hold.nc.Close()
					b.ReportMetric(float64(grown)/streams/(1<<20), "MiB/stream")
					b.ReportMetric(float64(coded), "compressed")
				}
				waitEncodersIdle(b)
			})
		}
	}
}

// settledHeap is the Go heap in use once it stops growing: the streams'
// goroutines have read and compressed what they will before they wait
// for the client.
func settledHeap() int64 {
	var m runtime.MemStats
	last := int64(-1)
	for range 100 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		now := int64(m.HeapInuse)
		if last >= 0 && now-last < 64<<10 && last-now < 64<<10 {
			return now
		}
		last = now
		time.Sleep(20 * time.Millisecond)
	}
	return last
}
