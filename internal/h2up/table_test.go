package h2up

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// viewHead is a request head whose authority and a custom field are views
// of buf, as the core's fields are views of a buffer it reuses.
func viewHead(buf []byte) []hpack.HeaderField {
	v := unsafe.String(unsafe.SliceData(buf), len(buf))
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: v},
		{Name: ":path", Value: "/svc/Call"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "x-view", Value: v},
	}
}

// sendHead opens a stream and writes fields as its head, ending it.
func sendHead(t *testing.T, c *Conn, fields []hpack.HeaderField) *Stream {
	t.Helper()
	s := c.Open()
	if s == nil {
		t.Fatal("no stream")
	}
	s.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := s.WriteHead(fields, true); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRepeatedFieldsGoAsIndexes checks that a field sent again goes as an
// index into the backend's HPACK table, and that the table holds what was
// sent even when the caller's buffer under the fields changes afterwards.
func TestRepeatedFieldsGoAsIndexes(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	var sizes []uint32
	for i, want := range []string{"backend-one", "backend-one", "backend-two", "backend-two"} {
		buf := []byte(want)
		s := sendHead(t, c, viewHead(buf))
		// The caller reuses its buffer once the head is out.
		copy(buf, "XXXXXXXXXXX")
		h := f.until("a request head", isHeaders).(*http2.MetaHeadersFrame)
		if got := h.PseudoValue("authority"); got != want {
			t.Fatalf("request %d: :authority %q, want %q", i, got, want)
		}
		var view string
		for _, fl := range h.RegularFields() {
			if fl.Name == "x-view" {
				view = fl.Value
			}
		}
		if view != want {
			t.Fatalf("request %d: x-view %q, want %q", i, view, want)
		}
		sizes = append(sizes, h.Header().Length)
		s.Close()
	}
	// The second block repeats the first, the fourth the third: each is
	// a few bytes of indexes.
	if sizes[1] > 8 || sizes[3] > 8 || sizes[0] < 20 {
		t.Fatalf("header block sizes %v: want the repeats to be indexes of at most 8 bytes", sizes)
	}
}

// TestBackendsTableSizeIsKept checks that a backend whose decoder keeps
// no table (SETTINGS_HEADER_TABLE_SIZE 0) is sent no index into one.
func TestBackendsTableSizeIsKept(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	f.fr.ReadMetaHeaders = hpack.NewDecoder(0, nil)
	buf := []byte("backend-one")
	for i := range 3 {
		s := sendHead(t, c, viewHead(buf))
		h := f.until("a request head", isHeaders).(*http2.MetaHeadersFrame)
		if got := h.PseudoValue("authority"); got != "backend-one" {
			t.Fatalf("request %d: :authority %q", i, got)
		}
		s.Close()
	}
}
