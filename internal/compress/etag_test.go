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
		e       Encoding
		want    string
		changed bool
	}{
		{name: "strong gzip", value: `"abc-gzip"`, e: Gzip, want: `"abc"`, changed: true},
		{name: "strong br", value: `"abc-br"`, e: Brotli, want: `"abc"`, changed: true},
		{name: "strong zstd", value: `"abc-zstd"`, e: Zstd, want: `"abc"`, changed: true},
		{name: "weak with suffix", value: `W/"abc-gzip"`, e: Gzip, want: `W/"abc"`, changed: true},
		{name: "list", value: `"a-gzip", W/"b-gzip" ,"c",  "d-zstd"`, e: Gzip, want: `"a", W/"b" ,"c",  "d-zstd"`, changed: true},
		{name: "another coding's tag stays", value: `"abc-br"`, e: Gzip, want: `"abc-br"`},
		{name: "identity takes nothing off", value: `"abc-gzip"`, e: Identity, want: `"abc-gzip"`},
		{name: "no suffix", value: `"abc", W/"def"`, e: Gzip, want: `"abc", W/"def"`},
		{name: "star", value: `*`, e: Gzip, want: `*`},
		{name: "empty", value: ``, e: Gzip, want: ``},
		{name: "suffix not at the end", value: `"abc-gzip-x"`, e: Gzip, want: `"abc-gzip-x"`},
		{name: "suffix without dash", value: `"abcgzip"`, e: Gzip, want: `"abcgzip"`},
		{name: "other coding", value: `"abc-deflate"`, e: Gzip, want: `"abc-deflate"`},
		{name: "suffix of suffix once", value: `"abc-gzip-gzip"`, e: Gzip, want: `"abc-gzip"`, changed: true},
		{name: "empty tag with suffix", value: `"-br"`, e: Brotli, want: `""`, changed: true},
		{name: "upper case suffix is not relay's", value: `"abc-GZIP"`, e: Gzip, want: `"abc-GZIP"`},
		{name: "unterminated tag", value: `"a-gzip", "b-gzip`, e: Gzip, want: `"a", "b-gzip`, changed: true},
		{name: "unquoted garbage", value: `abc-gzip`, e: Gzip, want: `abc-gzip`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := StripETags([]byte("x:"), []byte(tt.value), tt.e)
			if string(got) != "x:"+tt.want || changed != tt.changed {
				t.Errorf("StripETags(%q, %v) = %q, %v; want %q, %v", tt.value, tt.e, got[2:], changed, tt.want, tt.changed)
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
			back, changed := StripETags(nil, sent, e)
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
		dst, _ = StripETags(dst[:0], list, Gzip)
	})
	if allocs != 0 {
		t.Errorf("AppendETag and StripETags allocate %.1f times into a large enough dst, want 0", allocs)
	}
}
