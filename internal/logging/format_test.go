package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/netip"
	"testing"
	"time"
	"unicode/utf8"
)

// slogLine is the oracle for appendEntry: the line slog's own JSON handler
// prints for the same record, with the client as a string and the duration as
// a float64 of milliseconds.
func slogLine(t testing.TB, e *Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, nil)
	client := ""
	if e.Client.IsValid() {
		client = e.Client.String()
	}
	r := slog.NewRecord(e.Time, slog.LevelInfo, "access", 0)
	r.AddAttrs(
		slog.String("client", client),
		slog.String("method", string(e.Method)),
		slog.String("path", string(e.Path)),
		slog.String("proto", e.Proto),
		slog.Bool("tls", e.TLS),
		slog.Int("status", e.Status),
		slog.String("backend", e.Backend),
		slog.String("pool", e.Pool),
		slog.String("route", e.Route),
		slog.Float64("duration_ms", float64(e.Duration.Round(time.Microsecond)/time.Microsecond)/1000),
		slog.Int64("bytes_in", e.BytesIn),
		slog.Int64("bytes_out", e.BytesOut),
		slog.String("user_agent", boundedText(e.UserAgent)),
		slog.String("referer", boundedText(e.Referer)),
		slog.String("request_id", string(e.RequestID)),
	)
	if e.UpstreamConnect >= 0 {
		r.AddAttrs(slog.Float64("upstream_connect_ms", float64(e.UpstreamConnect.Round(time.Microsecond)/time.Microsecond)/1000))
	}
	if e.UpstreamResponse >= 0 {
		r.AddAttrs(slog.Float64("upstream_response_ms", float64(e.UpstreamResponse.Round(time.Microsecond)/time.Microsecond)/1000))
	}
	if e.GRPCStatus != "" {
		r.AddAttrs(slog.String("grpc_status", e.GRPCStatus))
	}
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatalf("slog handler: %v", err)
	}
	return buf.Bytes()
}

// boundedText is a header value as a line should hold it: cut at
// MaxValueBytes, or before it where a rune would be split, and marked.
func boundedText(v []byte) string {
	if len(v) <= MaxValueBytes {
		return string(v)
	}
	n := 0
	for n < len(v) {
		_, size := utf8.DecodeRune(v[n:])
		if n+size > MaxValueBytes {
			break
		}
		n += size
	}
	return string(v[:n]) + TruncatedMark
}

func TestAppendEntryMatchesSlog(t *testing.T) {
	start := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	india := time.FixedZone("IST", 5*3600+1800)
	base := Entry{
		Time:     start,
		Client:   netip.MustParseAddrPort("192.0.2.7:51234"),
		Method:   []byte("GET"),
		Path:     []byte("/api/v1/items?id=42"),
		Proto:    "HTTP/1.1",
		Status:   200,
		Backend:  "http://127.0.0.1:8001",
		Duration: 1234567 * time.Nanosecond,
		BytesIn:  0,
		BytesOut: 5120,

		UserAgent:        []byte("curl/8.5.0"),
		Referer:          []byte("https://example.com/from"),
		RequestID:        []byte("0123456789abcdef0000000000000001"),
		UpstreamConnect:  0,
		UpstreamResponse: 987 * time.Microsecond,
	}
	tests := []struct {
		name string
		edit func(e *Entry)
	}{
		{"plain", func(e *Entry) {}},
		{"ipv6 client", func(e *Entry) { e.Client = netip.MustParseAddrPort("[2001:db8::1]:443") }},
		{"ipv6 zone", func(e *Entry) { e.Client = netip.MustParseAddrPort(`[fe80::1%eth0]:80`) }},
		{"ipv4-mapped client", func(e *Entry) { e.Client = netip.MustParseAddrPort("[::ffff:10.0.0.1]:80") }},
		{"no client", func(e *Entry) { e.Client = netip.AddrPort{} }},
		{"no backend", func(e *Entry) { e.Backend = ""; e.Status = 503 }},
		{"HTTP/2 over TLS", func(e *Entry) { e.Proto, e.TLS = "HTTP/2.0", true }},
		{"quotes and backslashes", func(e *Entry) { e.Path = []byte(`/a"b\c\\"d"`) }},
		{"control characters", func(e *Entry) { e.Path = []byte("/\x00\x01\x08\t\n\x0b\x0c\r\x1b\x1f\x7f") }},
		{"log injection", func(e *Entry) {
			e.Path = []byte("/x\"}\n{\"time\":\"1970-01-01T00:00:00Z\",\"level\":\"ERROR\",\"msg\":\"forged\"}")
		}},
		{"invalid utf-8", func(e *Entry) { e.Path = []byte("/\xff\xfe/\xc3/\xe2\x82/\xf0\x9f\x98/\xed\xa0\x80/\xc0\xaf") }},
		{"valid utf-8", func(e *Entry) { e.Path = []byte("/café/日本/😀") }},
		{"line separators", func(e *Entry) { e.Path = []byte("/a\u2028b\u2029c") }},
		{"html characters", func(e *Entry) { e.Path = []byte("/<script>&amp;</script>") }},
		{"hostile method", func(e *Entry) { e.Method = []byte("G\"E\\T\n") }},
		{"hostile backend", func(e *Entry) { e.Backend = "http://h/\"\x01\xff" }},
		{"empty method and path", func(e *Entry) { e.Method = nil; e.Path = nil }},
		{"zero duration", func(e *Entry) { e.Duration = 0 }},
		{"sub-microsecond rounds down", func(e *Entry) { e.Duration = 499 * time.Nanosecond }},
		{"sub-microsecond rounds up", func(e *Entry) { e.Duration = 500 * time.Nanosecond }},
		{"one microsecond", func(e *Entry) { e.Duration = time.Microsecond }},
		{"trailing zero trimmed", func(e *Entry) { e.Duration = 1500 * time.Microsecond }},
		{"whole milliseconds", func(e *Entry) { e.Duration = 2 * time.Second }},
		{"negative duration", func(e *Entry) { e.Duration = -1500 * time.Microsecond }},
		{"long duration", func(e *Entry) { e.Duration = 90*time.Minute + 7*time.Microsecond }},
		{"whole-second time", func(e *Entry) { e.Time = start.Truncate(time.Second) }},
		{"nanosecond time", func(e *Entry) { e.Time = start.Add(1) }},
		{"time zone", func(e *Entry) { e.Time = start.In(india) }},
		{"large counters", func(e *Entry) { e.BytesIn = math.MaxInt64; e.BytesOut = 1 << 40; e.Status = 599 }},
		{"no header values", func(e *Entry) { e.UserAgent, e.Referer, e.RequestID = nil, nil, nil }},
		{"hostile user agent", func(e *Entry) {
			e.UserAgent = []byte("x\"}\n{\"msg\":\"forged\"}\r\x00\xff\u2028")
		}},
		{"hostile referer", func(e *Entry) { e.Referer = []byte("\"\\\x1b[2J") }},
		{"user agent at the bound", func(e *Entry) { e.UserAgent = bytes.Repeat([]byte("a"), MaxValueBytes) }},
		{"user agent past the bound", func(e *Entry) { e.UserAgent = bytes.Repeat([]byte("a"), MaxValueBytes+1) }},
		{"user agent cut inside a rune", func(e *Entry) {
			e.UserAgent = append(bytes.Repeat([]byte("a"), MaxValueBytes-1), "€😀"...)
		}},
		{"user agent cut after a rune", func(e *Entry) {
			e.UserAgent = append(bytes.Repeat([]byte("a"), MaxValueBytes-3), "€😀"...)
		}},
		{"user agent cut inside a long rune", func(e *Entry) {
			e.UserAgent = append(bytes.Repeat([]byte("a"), MaxValueBytes-3), "😀"...)
		}},
		{"referer past the bound, escaped", func(e *Entry) { e.Referer = bytes.Repeat([]byte("\"\n"), MaxValueBytes) }},
		{"no upstream", func(e *Entry) { e.UpstreamConnect, e.UpstreamResponse, e.Backend = -1, -1, "" }},
		{"no response head", func(e *Entry) { e.UpstreamConnect, e.UpstreamResponse = 3*time.Millisecond, -1 }},
		{"dialed", func(e *Entry) { e.UpstreamConnect = 1500 * time.Microsecond }},
		{"grpc ok", func(e *Entry) { e.GRPCStatus = "0" }},
		{"grpc unavailable from relay", func(e *Entry) { e.GRPCStatus, e.UpstreamConnect, e.UpstreamResponse = "14", -1, -1 }},
		{"hostile grpc status", func(e *Entry) { e.GRPCStatus = "1\"}\n{\"msg\":\"forged\"}\xff" }},
	}
	// shared sees the cases one after another, as a running access log
	// would, so its time cache hits and misses; fresh starts empty each time.
	var shared lineFormatter
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			tt.edit(&e)
			want := slogLine(t, &e)
			var fresh lineFormatter
			got := fresh.appendEntry(nil, &e)
			if !bytes.Equal(got, want) {
				t.Fatalf("line differs from slog's\n got: %s\nwant: %s", got, want)
			}
			if again := shared.appendEntry(nil, &e); !bytes.Equal(again, want) {
				t.Fatalf("line after earlier entries differs from slog's\n got: %s\nwant: %s", again, want)
			}
			if !json.Valid(bytes.TrimSuffix(got, []byte("\n"))) {
				t.Fatalf("not valid JSON: %s", got)
			}
			if bytes.Count(got, []byte("\n")) != 1 {
				t.Fatalf("want exactly one newline, at the end: %q", got)
			}
		})
	}
}

func TestAppendEntryValues(t *testing.T) {
	start := time.Date(2025, 3, 14, 15, 9, 26, 535897123, time.FixedZone("", -7*3600))
	e := &Entry{
		Time:     start,
		Client:   netip.MustParseAddrPort("[2001:db8::5]:40000"),
		Method:   []byte("POST"),
		Path:     []byte("/up\"load\xff"),
		Status:   502,
		Backend:  "http://10.0.0.3:80",
		Duration: 12*time.Millisecond + 345*time.Microsecond + 678*time.Nanosecond,
		BytesIn:  1 << 20,
		BytesOut: 17,
	}
	var got struct {
		Time       string  `json:"time"`
		Level      string  `json:"level"`
		Msg        string  `json:"msg"`
		Client     string  `json:"client"`
		Method     string  `json:"method"`
		Path       string  `json:"path"`
		Status     int     `json:"status"`
		Backend    string  `json:"backend"`
		DurationMS float64 `json:"duration_ms"`
		BytesIn    int64   `json:"bytes_in"`
		BytesOut   int64   `json:"bytes_out"`
	}
	var f lineFormatter
	line := f.appendEntry(nil, e)
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("unmarshal %s: %v", line, err)
	}
	tm, err := time.Parse(time.RFC3339Nano, got.Time)
	if err != nil || !tm.Equal(start) {
		t.Errorf("time = %q (%v), want %v", got.Time, err, start)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"level", got.Level, "INFO"},
		{"msg", got.Msg, "access"},
		{"client", got.Client, "[2001:db8::5]:40000"},
		{"method", got.Method, "POST"},
		{"path", got.Path, "/up\"load\ufffd"},
		{"status", got.Status, 502},
		{"backend", got.Backend, "http://10.0.0.3:80"},
		{"duration_ms", got.DurationMS, 12.346},
		{"bytes_in", got.BytesIn, int64(1 << 20)},
		{"bytes_out", got.BytesOut, int64(17)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// FuzzAppendEntry checks appendEntry against slog for arbitrary strings,
// numbers and times. Its seeds run with the ordinary tests.
func FuzzAppendEntry(f *testing.F) {
	f.Add([]byte("GET"), []byte("/"), "b", 200, int64(1234567), int64(0), int64(10), int64(0), 0)
	f.Add([]byte("\x00"), []byte("\xff\"\\\u2028"), "\n", -1, int64(-5), int64(-1), int64(math.MaxInt64), int64(999999999), -3600)
	f.Add([]byte{}, []byte("/é\xe2\x82"), "", 0, int64(499), int64(1), int64(2), int64(1), 19800)
	f.Fuzz(func(t *testing.T, method, path []byte, backend string, status int, durNS, in, out, nanos int64, zoneSec int) {
		// Past 2^53 microseconds float64 loses whole units, and slog's float
		// oracle with it; durations of centuries do not occur.
		const limit = int64(1<<53) * 1000
		if durNS > limit || durNS < -limit {
			return
		}
		zone := time.FixedZone("", zoneSec%(18*3600))
		start := time.Date(2025, 1, 2, 3, 4, 5, 0, zone).Add(time.Duration(nanos % int64(400*24*time.Hour)))
		e := &Entry{
			Time:     start,
			Client:   netip.MustParseAddrPort("127.0.0.1:9"),
			Method:   method,
			Path:     path,
			Status:   status,
			Backend:  backend,
			Duration: time.Duration(durNS),
			BytesIn:  in,
			BytesOut: out,
		}
		var f lineFormatter
		for _, at := range []time.Time{start, start.Add(time.Duration(-nanos % int64(time.Second))), start} {
			e.Time = at
			if got, want := f.appendEntry(nil, e), slogLine(t, e); !bytes.Equal(got, want) {
				t.Fatalf("line differs from slog's\n got: %s\nwant: %s", got, want)
			}
		}
	})
}

// TestPlain8 checks the eight-byte test against jsonPlain for every byte
// value in every position, beside plain bytes and beside each other.
func TestPlain8(t *testing.T) {
	pack := func(b [8]byte) uint64 {
		var v uint64
		for i := range b {
			v |= uint64(b[i]) << (8 * i)
		}
		return v
	}
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{'a', ' ', '~', 0x7f, '!', '[', ']'} {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(c)
				if got, want := plain8(pack(b)), jsonPlain[c]; got != want {
					t.Fatalf("plain8(%q) = %v, want %v", b, got, want)
				}
			}
		}
	}
	// Pairs of bytes, so that a borrow from one byte's test cannot hide
	// or fake another's.
	for c := range 256 {
		for d := range 256 {
			b := [8]byte{'x', byte(c), byte(d), 'x', 'x', 'x', 'x', byte(d)}
			if got, want := plain8(pack(b)), jsonPlain[c] && jsonPlain[d]; got != want {
				t.Fatalf("plain8(%q) = %v, want %v", b, got, want)
			}
		}
	}
}
