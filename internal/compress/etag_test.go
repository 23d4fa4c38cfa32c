package compress

import "testing"

func TestAppendETag(t *testing.T) {
	tests := []struct {
		name string
		etag string
		e    Encoding
		want string
	}{
		{name: "strong gzip", etag: `"abc"`, e: Gzip, want: `"abc-gzip"`},
		{name: "strong br", etag: `"abc"`, e: Brotli, want: `"abc-br"`},
		{name: "strong zstd", etag: `"33a64df551425fcc55e4d42a148795d9f25f89d4"`, e: Zstd, want: `"33a64df551425fcc55e4d42a148795d9f25f89d4-zstd"`},
		{name: "empty strong tag", etag: `""`, e: Gzip, want: `"-gzip"`},
		{name: "surrounding whitespace", etag: ` "abc" `, e: Gzip, want: `"abc-gzip"`},
		{name: "weak unchanged", etag: `W/"abc"`, e: Gzip, want: `W/"abc"`},
		{name: "identity unchanged", etag: `"abc"`, e: Identity, want: `"abc"`},
		{name: "unquoted unchanged", etag: `abc`, e: Gzip, want: `abc`},
		{name: "open quote unchanged", etag: `"abc`, e: Gzip, want: `"abc`},
		{name: "lone quote unchanged", etag: `"`, e: Gzip, want: `"`},
		{name: "list unchanged", etag: `"a", "b"`, e: Gzip, want: `"a", "b"`},
		{name: "empty unchanged", etag: ``, e: Brotli, want: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("ETag: ")
			got := AppendETag(prefix, []byte(tt.etag), tt.e)
			if string(got) != "ETag: "+tt.want {
				t.Errorf("AppendETag(%q, %v) = %q, want %q", tt.etag, tt.e, got[len(prefix):], tt.want)
			}
		})
	}
}

func TestStripETags(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    string
		changed bool
	}{
		{name: "strong gzip", value: `"abc-gzip"`, want: `"abc"`, changed: true},
		{name: "strong br", value: `"abc-br"`, want: `"abc"`, changed: true},
		{name: "strong zstd", value: `"abc-zstd"`, want: `"abc"`, changed: true},
		{name: "weak with suffix", value: `W/"abc-gzip"`, want: `W/"abc"`, changed: true},
		{name: "list", value: `"a-gzip", W/"b-br" ,"c",  "d-zstd"`, want: `"a", W/"b" ,"c",  "d"`, changed: true},
		{name: "no suffix", value: `"abc", W/"def"`, want: `"abc", W/"def"`},
		{name: "star", value: `*`, want: `*`},
		{name: "empty", value: ``, want: ``},
		{name: "suffix not at the end", value: `"abc-gzip-x"`, want: `"abc-gzip-x"`},
		{name: "suffix without dash", value: `"abcgzip"`, want: `"abcgzip"`},
		{name: "other coding", value: `"abc-deflate"`, want: `"abc-deflate"`},
		{name: "suffix of suffix once", value: `"abc-gzip-gzip"`, want: `"abc-gzip"`, changed: true},
		{name: "empty tag with suffix", value: `"-br"`, want: `""`, changed: true},
		{name: "upper case suffix is not relay's", value: `"abc-GZIP"`, want: `"abc-GZIP"`},
		{name: "unterminated tag", value: `"a-gzip", "b-gzip`, want: `"a", "b-gzip`, changed: true},
		{name: "unquoted garbage", value: `abc-gzip`, want: `abc-gzip`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := StripETags([]byte("x:"), []byte(tt.value))
			if string(got) != "x:"+tt.want || changed != tt.changed {
				t.Errorf("StripETags(%q) = %q, %v; want %q, %v", tt.value, got[2:], changed, tt.want, tt.changed)
			}
		})
	}
}

// TestETagRoundTrip is revalidation through relay: the tag a client got
// on a compressed response, sent back, reaches the backend as the tag
// the backend made.
func TestETagRoundTrip(t *testing.T) {
	for _, etag := range []string{`"abc"`, `""`, `"x-gzip"`, `"v1.2-br-cache"`} {
		for _, e := range []Encoding{Gzip, Brotli, Zstd} {
			sent := AppendETag(nil, []byte(etag), e)
			back, changed := StripETags(nil, sent)
			if string(back) != etag || !changed {
				t.Errorf("%s with %v: sent %s, stripped to %s (changed %v)", etag, e, sent, back, changed)
			}
		}
	}
}

func TestETagAllocs(t *testing.T) {
	dst := make([]byte, 0, 128)
	tag, list := []byte(`"abc"`), []byte(`"a-gzip", W/"b-br", "c"`)
	allocs := testing.AllocsPerRun(100, func() {
		dst = AppendETag(dst[:0], tag, Brotli)
		dst, _ = StripETags(dst[:0], list)
	})
	if allocs != 0 {
		t.Errorf("AppendETag and StripETags allocate %.1f times into a large enough dst, want 0", allocs)
	}
}
