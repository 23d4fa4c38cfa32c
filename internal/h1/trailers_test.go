package h1

import "testing"

// AppendPassingTrailers keeps the lines of fields that may follow the
// content, whatever the case of their names and however long, and
// drops the others, by whole name or by prefix, without allocating.
func TestAppendPassingTrailers(t *testing.T) {
	raw := []byte("X-Sum: 11\r\nX-Request-ID: a\r\nHOST: evil\r\nProxy-Authorization-Of-Some-Length: x\r\n" +
		"If-None-Match: *\r\nX-A-Name-Longer-Than-Any-Listed: 1\r\nTransfer-Encodingx: 2\r\nCookie: SRV=x\r\nGrpc-Status: 0\r\n")
	want := "X-Sum: 11\r\nX-A-Name-Longer-Than-Any-Listed: 1\r\nTransfer-Encodingx: 2\r\nGrpc-Status: 0\r\n"
	if got := string(AppendPassingTrailers(nil, raw, nil)); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	buf := make([]byte, 0, len(raw))
	if n := testing.AllocsPerRun(100, func() { buf = AppendPassingTrailers(buf[:0], raw, []byte("x-hop, X-Other,")) }); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}
