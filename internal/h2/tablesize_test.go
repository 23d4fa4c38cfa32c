package h2

import (
	"io"
	"net/http"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
)

// TestClientTableSizeChanges checks, over a connection, that responses
// decode as they were sent while the client changes its
// SETTINGS_HEADER_TABLE_SIZE between them: to 0 and back in two SETTINGS
// frames, to a size smaller than the table's entries, and up again. The
// client's decoder takes no table larger than its last setting.
func TestClientTableSizeChanges(t *testing.T) {
	f := startFront(t, newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Same", "a value sent with every response")
		w.Header().Set("X-Path", r.URL.Path)
		io.WriteString(w, "ok")
	}))
	rc := dialRaw(t, f.addr)
	id := uint32(1)
	check := func(what string) {
		t.Helper()
		path := "/p" + strconv.Itoa(int(id))
		rc.get(id, path)
		r := rc.response(id)
		if r.status != 200 || len(r.get("x-same")) != 1 || r.get("x-same")[0] != "a value sent with every response" ||
			len(r.get("x-path")) != 1 || r.get("x-path")[0] != path || string(r.body) != "ok" {
			t.Fatalf("%s: stream %d: status %d, fields %v, body %q", what, id, r.status, r.fields, r.body)
		}
		id += 2
	}
	set := func(sizes ...uint32) {
		t.Helper()
		for _, v := range sizes {
			if err := rc.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: v}); err != nil {
				t.Fatal(err)
			}
		}
		rc.fr.ReadMetaHeaders.SetAllowedMaxDynamicTableSize(sizes[len(sizes)-1])
	}
	check("first")
	check("second")
	set(0, 4096)
	check("after 0 and back to 4096")
	check("again")
	set(0)
	check("with no table")
	set(100)
	check("with a table of 100 bytes")
	set(4096, 64, 2048)
	check("after three sizes")
	check("again")
}
