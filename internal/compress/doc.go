// Package compress is relay's response compression: which coding a
// request accepts (Choose), which responses are worth compressing
// (Compressible), the encoders that compress a body as it streams
// through (Encoder), and the entity-tags of compressed representations
// (AppendETag, StripETags). It imports no other relay package; the
// forwarding core calls it on a response head and feeds the body through
// it, and relay's config package decodes a `compress:` section into
// Config and reports Config.Check's problems.
//
// # What the core does with it
//
// For a request, the core gathers its Accept-Encoding fields into an
// Accept (Add per field), strips relay's suffixes from If-None-Match and
// If-Match (StripETags) so that the backend sees its own tags; not from
// If-Range, whose tag must keep failing to match, since a range of the
// identity body would not continue a compressed one the client holds.
// For the
// response, it compresses only when all of these hold, and they are the
// core's to check since they need the whole exchange: the request is not
// HEAD; the status has a body and is not 206 (a range of the identity
// body is not a range of the compressed one); the response has no
// Content-Encoding already and no Cache-Control: no-transform; it sets
// no cookie unless WithCookies; Compressible(Content-Type,
// Content-Length); and Choose gives a coding other than Identity. Every
// response that Compressible admits gets Vary: Accept-Encoding, whether
// this client got it compressed or not, so that caches keep the two
// representations apart. A compressed response loses Content-Length (its
// length is known only at the end: chunked on HTTP/1.1, END_STREAM on
// HTTP/2) and gets Content-Encoding: Token() and its ETag through
// AppendETag. The body then goes through Write, Output, Consume, with
// Flush when the backend pauses (nothing more to read at once), and
// Close, Release at its end.
//
// # Memory
//
// A compressing stream holds its encoder's state, fixed by the coding
// and level and bounded by the windows relay sets (BrotliWindowLog,
// ZstdWindow; deflate's window is always 32 KiB), plus its output
// buffer, which holds what one call produced until the caller drains it
// and which Release keeps only up to MaxPooledOutput. Measured with
// runtime.MemStats after a 300 KB body (TestEncoderMemory,
// BenchmarkEncoderMemory; klauspost/compress v1.20.5, andybalholm/brotli
// v1.3.0, amd64), one encoder at the default levels holds:
//
//	gzip level 5                        1.04 MiB
//	br quality 4, window 2^18           1.98 MiB
//	zstd fastest, window 256 KiB        0.86 MiB
//
// and at the other levels:
//
//	gzip   1: 0.79 MiB  2-3: 1.16  4: 0.91  5-6: 1.04  7-8: 0.98  9: 1.36
//	br     1: 0.25 MiB  2: 1.18  3: 1.12  4: 1.98  5: 2.5  6: 3.5
//	       7: 9.5  8: 17.5  9: 34  10-11: 4.2
//	zstd   fastest: 0.86 MiB  default: 1.9  better: 4.7  best: 35
//
// Those figures flush every 64 KiB; a body that comes faster than relay
// reads it is not flushed, and brotli then holds more: 3.3 MiB at
// quality 4 after a megabyte (encoderCost has every level's worst,
// TestEncoderCost holds the defaults to it). So a thousand responses
// compressing at once at the defaults would hold 1 to 3 GiB, and a
// client can keep responses compressing as long as it likes by not
// reading them: the encoders in use share the process's budget
// (SetEncoderMemory, DefaultEncoderMemory), past which Policy.Encoder
// gives nil and the response goes uncompressed. brotli 7 to 9 and zstd
// best are for a few large, slow responses, not for every page. An idle
// encoder waits in a sync.Pool per coding and level, shared by every
// Policy at those levels, and the runtime frees idle ones over two
// garbage collections.
//
// # Allocations
//
// Choose, Accept.Add, Compressible, AppendETag and StripETags (into a
// large enough dst) allocate nothing. A response's encoder, taken from
// and given back to its pool, allocates nothing for gzip and br in
// steady state (TestEncoderAllocs, BenchmarkEncoder). zstd allocates
// once per stream that flushes or outgrows one 64 KiB block: the library
// writes the frame header from a stack array through an io.Writer, which
// moves those 24 bytes to the heap.
//
// # Speed
//
// BenchmarkEncoder, a 100 KB HTML page in 16 KiB writes at the default
// levels on one core of a shared 2-core Xeon: zstd about 415 MB/s to
// 21% of its size, gzip about 290 MB/s to 19%, br about 80 MB/s to 20%.
// On real pages and API answers br and zstd gain more over gzip than on
// that generated text (the Go specification's HTML: gzip 5 28.6%, br 4
// 27.6%, zstd fastest 31.1%; a 750 KB Kubernetes OpenAPI JSON: gzip 5
// 9.9%, br 4 7.5%, zstd fastest 8.9%).
package compress
