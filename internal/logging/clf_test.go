package logging

import (
	"bytes"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// combinedLine is a combined line as log analysers read it: nginx's
// combined format, then relay's fields. Quoted fields hold no quote, so a
// line that matches was split where relay meant it to be.
var combinedLine = regexp.MustCompile(`^(\S+) - (\S+) \[([^\]]+)\] "([^"]*)" (\d{3}) (\d+) "([^"]*)" "([^"]*)" ` +
	`rid="([^"]*)" upstream="([^"]*)" pool="([^"]*)" route="([^"]*)" rt=(\S+) uct=(\S+) urt=(\S+)(?: grpc_status="([^"]*)")?$`)

// unescapeCLF undoes appendCLFEscaped's \xHH.
func unescapeCLF(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+3 >= len(s) || s[i+1] != 'x' {
				t.Fatalf("bad escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				t.Fatalf("bad escape in %q: %v", s, err)
			}
			b.WriteByte(byte(n))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func combinedEntry() Entry {
	return Entry{
		Time:     time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.FixedZone("", -7*3600)),
		Client:   netip.MustParseAddrPort("192.0.2.7:51234"),
		Method:   []byte("GET"),
		Path:     []byte("/api/v1/items?id=42"),
		Proto:    "HTTP/1.1",
		Status:   200,
		Backend:  "http://127.0.0.1:8001",
		Duration: 12345 * time.Microsecond,
		BytesOut: 5120,

		UserAgent:        []byte("Mozilla/5.0 (X11; Linux x86_64)"),
		Referer:          []byte("https://example.com/from"),
		RequestID:        []byte("0123456789abcdef0000000000000001"),
		UpstreamConnect:  1500 * time.Microsecond,
		UpstreamResponse: 9 * time.Millisecond,
	}
}

func TestCombinedLine(t *testing.T) {
	e := combinedEntry()
	var f lineFormatter
	f.format = Combined
	got := string(f.appendLine(nil, &e))
	want := `192.0.2.7 - - [14/Mar/2025:15:09:26 -0700] "GET /api/v1/items?id=42 HTTP/1.1" 200 5120 ` +
		`"https://example.com/from" "Mozilla/5.0 (X11; Linux x86_64)" ` +
		`rid="0123456789abcdef0000000000000001" upstream="http://127.0.0.1:8001" pool="-" route="-" rt=0.012 uct=0.002 urt=0.009` + "\n"
	if got != want {
		t.Fatalf("combined line\n got: %s\nwant: %s", got, want)
	}

	// What does not exist is "-", as nginx writes it.
	e = Entry{Time: e.Time, Status: 400, UpstreamConnect: -1, UpstreamResponse: -1}
	got = string(f.appendLine(nil, &e))
	want = `- - - [14/Mar/2025:15:09:26 -0700] "-" 400 0 "-" "-" rid="-" upstream="-" pool="-" route="-" rt=0.000 uct=- urt=-` + "\n"
	if got != want {
		t.Fatalf("combined line without values\n got: %s\nwant: %s", got, want)
	}

	// A gRPC response adds its grpc-status at the end; other lines keep
	// the fields above.
	e = combinedEntry()
	e.Proto, e.GRPCStatus = "HTTP/2.0", "5"
	got = string(f.appendLine(nil, &e))
	want = `192.0.2.7 - - [14/Mar/2025:15:09:26 -0700] "GET /api/v1/items?id=42 HTTP/2.0" 200 5120 ` +
		`"https://example.com/from" "Mozilla/5.0 (X11; Linux x86_64)" ` +
		`rid="0123456789abcdef0000000000000001" upstream="http://127.0.0.1:8001" pool="-" route="-" rt=0.012 uct=0.002 urt=0.009 grpc_status="5"` + "\n"
	if got != want {
		t.Fatalf("combined line of a gRPC response\n got: %s\nwant: %s", got, want)
	}
}

// TestCombinedLineCannotBeForged: whatever a client puts in the request
// line, the referer or the user agent, the entry is one line that splits
// into the fields relay wrote, and each reads back as what was sent.
func TestCombinedLineCannotBeForged(t *testing.T) {
	forged := "\n10.0.0.1 - admin [14/Mar/2025:15:09:26 -0700] \"GET /admin HTTP/1.1\" 200 1 \"-\" \"-\" rid=\"-\" upstream=\"-\" pool=\"-\" route=\"-\" rt=0.000 uct=- urt=-"
	tests := []struct {
		name string
		edit func(e *Entry)
	}{
		{"user agent ends its field", func(e *Entry) { e.UserAgent = []byte(`x" "y` + forged) }},
		{"referer ends its field", func(e *Entry) { e.Referer = []byte(`"` + forged + "\r") }},
		{"path ends the request", func(e *Entry) { e.Path = []byte(`/a" 200 0 "` + forged) }},
		{"method with a quote", func(e *Entry) { e.Method = []byte(`G"T`) }},
		{"backslash before a quote", func(e *Entry) { e.UserAgent = []byte(`\"` + forged) }},
		{"control and high bytes", func(e *Entry) { e.UserAgent = []byte("\x00\x1b[2J\x7f\xff\xc3\xa9") }},
		{"request id from a proxy", func(e *Entry) { e.RequestID = []byte(`a"b\c`) }},
		{"grpc status from a backend", func(e *Entry) { e.GRPCStatus = `0" x="1` + forged }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := combinedEntry()
			tt.edit(&e)
			var f lineFormatter
			f.format = Combined
			line := f.appendLine(nil, &e)
			if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
				t.Fatalf("want one line: %q", line)
			}
			for _, c := range line[:len(line)-1] {
				if c < 0x20 || c >= 0x7f {
					t.Fatalf("raw byte %#x in %q", c, line)
				}
			}
			m := combinedLine.FindStringSubmatch(string(line[:len(line)-1]))
			if m == nil {
				t.Fatalf("line does not split into the combined fields: %s", line)
			}
			request := string(e.Method) + " " + string(e.Path) + " " + e.Proto
			for _, c := range []struct{ name, got, want string }{
				{"client", m[1], "192.0.2.7"},
				{"user", m[2], "-"},
				{"request", unescapeCLF(t, m[4]), request},
				{"status", m[5], "200"},
				{"referer", unescapeCLF(t, m[7]), string(e.Referer)},
				{"user agent", unescapeCLF(t, m[8]), string(e.UserAgent)},
				{"request id", unescapeCLF(t, m[9]), string(e.RequestID)},
				{"grpc status", unescapeCLF(t, m[16]), e.GRPCStatus},
			} {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
				}
			}
		})
	}
}

func TestCombinedLineBoundsHeaderValues(t *testing.T) {
	e := combinedEntry()
	e.UserAgent = bytes.Repeat([]byte("u"), 64<<10)
	e.Referer = bytes.Repeat([]byte("\n"), MaxValueBytes+1)
	var f lineFormatter
	f.format = Combined
	line := f.appendLine(nil, &e)
	m := combinedLine.FindStringSubmatch(string(line[:len(line)-1]))
	if m == nil {
		t.Fatalf("line does not split into the combined fields: %.300s", line)
	}
	if want := strings.Repeat("u", MaxValueBytes) + TruncatedMark; m[8] != want {
		t.Errorf("user agent is %d bytes, want %d ending in %s", len(m[8]), len(want), TruncatedMark)
	}
	if want := strings.Repeat(`\x0A`, MaxValueBytes) + TruncatedMark; m[7] != want {
		t.Errorf("referer is %d bytes, want %d ending in %s", len(m[7]), len(want), TruncatedMark)
	}
	if len(line) > 6*MaxValueBytes {
		t.Errorf("line is %d bytes", len(line))
	}
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]Format{"json": JSON, "combined": Combined} {
		if got, err := ParseFormat(s); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseFormat("clf"); err == nil || !strings.Contains(err.Error(), "want json or combined") {
		t.Errorf("ParseFormat(clf) = %v, want an error naming the formats", err)
	}
}

// TestAccessLogCombined: WithFormat makes the access log write combined
// lines.
func TestAccessLogCombined(t *testing.T) {
	var c collector
	a := NewAccessLog(&c, WithFormat(Combined))
	e := combinedEntry()
	a.Log(&e)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lines := c.lines()
	if len(lines) != 1 || !combinedLine.MatchString(lines[0]) {
		t.Fatalf("lines %q, want one combined line", lines)
	}
}
