package compress

import "testing"

func mustNew(t testing.TB, c Config) *Policy {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	return p
}

func TestChoose(t *testing.T) {
	tests := []struct {
		name      string
		encodings []string // the server's order; nil for the default zstd, br, gzip
		fields    []string // the request's Accept-Encoding fields; nil: none
		want      Encoding
	}{
		{name: "absent", fields: nil, want: Identity},
		{name: "empty field", fields: []string{""}, want: Identity},
		{name: "gzip", fields: []string{"gzip"}, want: Gzip},
		{name: "browser list picks server order", fields: []string{"gzip, deflate, br"}, want: Brotli},
		{name: "higher q wins over server order", fields: []string{"br;q=0.9, gzip;q=1"}, want: Gzip},
		{name: "star", fields: []string{"*"}, want: Zstd},
		{name: "star refused", fields: []string{"*;q=0"}, want: Identity},
		{name: "identity refused alone", fields: []string{"identity;q=0"}, want: Identity},
		{name: "gzip refused, star others", fields: []string{"gzip;q=0, *"}, want: Zstd},
		{name: "gzip refused, star others, server order gzip br", encodings: []string{"gzip", "br"}, fields: []string{"gzip;q=0, *"}, want: Brotli},
		{name: "gzip refused", fields: []string{"gzip;q=0"}, want: Identity},
		{name: "tie goes to server order", fields: []string{"zstd;q=0.5, br;q=0.5, gzip;q=0.5"}, want: Zstd},
		{name: "tie goes to server order reversed", encodings: []string{"gzip", "br", "zstd"}, fields: []string{"zstd;q=0.5, br;q=0.5, gzip;q=0.5"}, want: Gzip},
		{name: "upper case token", fields: []string{"GZIP"}, want: Gzip},
		{name: "mixed case token and q", fields: []string{"Br;Q=0.5"}, want: Brotli},
		{name: "x-gzip is gzip", fields: []string{"x-gzip"}, want: Gzip},
		{name: "x-gzip weighs gzip", fields: []string{"x-gzip;q=0.3, zstd;q=0.2"}, want: Gzip},
		{name: "unknown coding only", fields: []string{"deflate"}, want: Identity},
		{name: "unknown codings among known", fields: []string{"compress, deflate, lz4, zstd"}, want: Zstd},
		{name: "q above 1 is malformed", fields: []string{"gzip;q=1.001"}, want: Identity},
		{name: "malformed member ignored, others count", fields: []string{"gzip;q=1.001, br;q=0.1"}, want: Brotli},
		{name: "four decimals is malformed", fields: []string{"gzip;q=0.0001"}, want: Identity},
		{name: "three decimals", fields: []string{"zstd;q=0.001"}, want: Zstd},
		{name: "q=1.000", fields: []string{"br;q=1.000"}, want: Brotli},
		{name: "q=1.0000 is malformed", fields: []string{"br;q=1.0000"}, want: Identity},
		{name: "q=2 is malformed", fields: []string{"br;q=2"}, want: Identity},
		{name: "q without leading digit", fields: []string{"gzip;q=.5"}, want: Identity},
		{name: "empty q", fields: []string{"gzip;q="}, want: Identity},
		{name: "bare semicolon", fields: []string{"gzip;"}, want: Identity},
		{name: "other parameter", fields: []string{"gzip;level=1"}, want: Identity},
		{name: "two weights", fields: []string{"gzip;q=0.5;q=1"}, want: Identity},
		{name: "space inside a token", fields: []string{"gz ip"}, want: Identity},
		{name: "whitespace around weight", fields: []string{"br ; q=0.8 , gzip"}, want: Gzip},
		{name: "tabs around weight", fields: []string{"gzip\t;\tq=0.5,\tbr;q=0.4"}, want: Gzip},
		{name: "empty members", fields: []string{" , ,gzip,, br ;q=0.3, "}, want: Gzip},
		{name: "several fields", fields: []string{"gzip;q=0.5", "br;q=0.6"}, want: Brotli},
		{name: "several fields, one empty", fields: []string{"", "zstd"}, want: Zstd},
		{name: "several fields, refusal in second", fields: []string{"*", "zstd;q=0"}, want: Brotli},
		{name: "server order only gzip", encodings: []string{"gzip"}, fields: []string{"zstd, br, gzip"}, want: Gzip},
		{name: "server order only gzip, client without it", encodings: []string{"gzip"}, fields: []string{"br, zstd"}, want: Identity},
		{name: "server order only gzip, star", encodings: []string{"gzip"}, fields: []string{"*"}, want: Gzip},
		{name: "identity weighed above gzip", fields: []string{"gzip;q=0.5, identity"}, want: Identity},
		{name: "identity tied with gzip", fields: []string{"gzip, identity"}, want: Gzip},
		{name: "identity through star above gzip", encodings: []string{"gzip"}, fields: []string{"gzip;q=0.5, *"}, want: Identity},
		{name: "star lower than named", fields: []string{"*;q=0.5, br;q=0.4"}, want: Zstd},
		{name: "duplicate keeps the higher weight", fields: []string{"gzip;q=0, gzip"}, want: Gzip},
		{name: "everything refused", fields: []string{"zstd;q=0, br;q=0, gzip;q=0, identity;q=0"}, want: Identity},
		{name: "identity and star refused", fields: []string{"identity;q=0, *;q=0"}, want: Identity},
		{name: "weights over server order", fields: []string{"gzip;q=0.8, zstd;q=0.9, br"}, want: Brotli},
	}
	policies := map[string]*Policy{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := ""
			for _, e := range tt.encodings {
				key += e + ","
			}
			p := policies[key]
			if p == nil {
				p = mustNew(t, Config{Encodings: tt.encodings})
				policies[key] = p
			}
			var a Accept
			for _, f := range tt.fields {
				a.Add([]byte(f))
			}
			if got := p.Choose(&a); got != tt.want {
				t.Errorf("Choose(%q) with server order %v = %v, want %v", tt.fields, p.Encodings(), got, tt.want)
			}
			if a.Present() != (tt.fields != nil) {
				t.Errorf("Present() = %v for fields %q", a.Present(), tt.fields)
			}
			// A reset Accept is a request without the field again.
			a.Reset()
			if got := p.Choose(&a); got != Identity || a.Present() {
				t.Errorf("after Reset: Choose = %v, Present = %v; want identity, false", got, a.Present())
			}
		})
	}
}

func TestChooseNilAccept(t *testing.T) {
	if got := mustNew(t, Config{}).Choose(nil); got != Identity {
		t.Errorf("Choose(nil) = %v, want identity", got)
	}
}

func TestChooseAllocs(t *testing.T) {
	p := mustNew(t, Config{})
	fields := [][]byte{[]byte("gzip, deflate, br;q=0.9"), []byte("zstd;q=0.95, *;q=0.1, identity")}
	var a Accept
	var got Encoding
	allocs := testing.AllocsPerRun(100, func() {
		a.Reset()
		for _, f := range fields {
			a.Add(f)
		}
		got = p.Choose(&a)
	})
	if allocs != 0 {
		t.Errorf("Add and Choose allocate %.1f times per request, want 0", allocs)
	}
	if got != Gzip {
		t.Errorf("Choose = %v, want gzip", got)
	}
}
