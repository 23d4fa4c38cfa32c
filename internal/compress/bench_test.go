package compress

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkEncoder compresses a 100 KB HTML page at the default levels
// as the core will: an encoder from the pool, 16 KiB writes (a read from
// the backend each) with the output drained after each, Close, Release.
// It reports the throughput over the uncompressed bytes, the allocations
// per response and the compressed size as a share of the original.
func BenchmarkEncoder(b *testing.B) {
	p := mustNew(b, Config{})
	body := htmlBody(100 << 10)
	for _, e := range codings {
		b.Run(e.String(), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var size int
			for b.Loop() {
				enc := p.Encoder(e)
				size = 0
				for off := 0; off < len(body); off += 16 << 10 {
					enc.Write(body[off:min(off+16<<10, len(body))])
					size += len(enc.Output())
					enc.Consume(len(enc.Output()))
				}
				enc.Close()
				size += len(enc.Output())
				enc.Consume(len(enc.Output()))
				enc.Release()
			}
			b.ReportMetric(float64(size)/float64(len(body)), "ratio")
		})
	}
}

// BenchmarkEncoderMemory reports what one encoder holds at every level
// (B/encoder), for the table in the package documentation; its timings
// mean nothing.
func BenchmarkEncoderMemory(b *testing.B) {
	var keys []poolKey
	for l := 1; l <= 9; l++ {
		keys = append(keys, poolKey{Gzip, l})
	}
	for l := 1; l <= 11; l++ {
		keys = append(keys, poolKey{Brotli, l})
	}
	for _, l := range zstdLevels {
		keys = append(keys, poolKey{Zstd, int(l.level)})
	}
	for _, key := range keys {
		level := fmt.Sprint(key.level)
		if key.coding == Zstd {
			level = zstd.EncoderLevel(key.level).String()
		}
		b.Run(key.coding.String()+"/"+level, func(b *testing.B) {
			bytes := encoderBytes(key, 4)
			for b.Loop() {
			}
			b.ReportMetric(float64(bytes), "B/encoder")
		})
	}
}

func BenchmarkChoose(b *testing.B) {
	p := mustNew(b, Config{})
	field := []byte("gzip, deflate, br, zstd")
	var a Accept
	b.ReportAllocs()
	for b.Loop() {
		a.Reset()
		a.Add(field)
		p.Choose(&a)
	}
}

func BenchmarkCompressible(b *testing.B) {
	p := mustNew(b, Config{})
	ct := []byte("application/problem+json; charset=utf-8")
	b.ReportAllocs()
	for b.Loop() {
		p.Compressible(ct, 4096)
	}
}
