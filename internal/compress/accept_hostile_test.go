package compress

import (
	"bytes"
	"strings"
	"testing"
)

// Accept-Encoding is the client's to write: whatever it holds, Add reads
// it in one pass without allocating, keeps nothing of it, and a member it
// cannot read counts as not said.
func TestAcceptHostile(t *testing.T) {
	huge := func(member string, n int) string { return strings.Repeat(member, n/len(member)+1)[:n] }
	tests := []struct {
		name  string
		value string
		want  Encoding
	}{
		{name: "commas only", value: ",,,,,,,", want: Identity},
		{name: "whitespace and commas", value: " \t, \t,\t ", want: Identity},
		{name: "q=-1", value: "gzip;q=-1", want: Identity},
		{name: "q=-0", value: "gzip;q=-0", want: Identity},
		{name: "q=+1", value: "gzip;q=+1", want: Identity},
		{name: "q=2", value: "gzip;q=2, br;q=0.5", want: Brotli},
		{name: "q=1.0000", value: "zstd;q=1.0000, gzip;q=0.2", want: Gzip},
		{name: "q=1e0", value: "gzip;q=1e0", want: Identity},
		{name: "q=0x1", value: "gzip;q=0x1", want: Identity},
		{name: "q=1. is 1", value: "gzip;q=1.", want: Gzip},
		{name: "q=0. is 0", value: "gzip;q=0.", want: Identity},
		{name: "q=99999999999999999999", value: "gzip;q=99999999999999999999", want: Identity},
		{name: "q with spaces inside", value: "gzip;q= 1", want: Identity},
		{name: "many weights on one coding", value: "gzip" + strings.Repeat(";q=0.5", 1000), want: Identity},
		{name: "a NUL", value: "gz\x00ip, br", want: Brotli},
		{name: "bytes past ASCII", value: "gzíp, zstd;q=0.1", want: Zstd},
		{name: "a thousand q-values", value: huge("gzip;q=0.001, br;q=0.002, ", 30000) + ", zstd;q=0.003", want: Zstd},
		{name: "a megabyte of commas", value: huge(",", 1<<20) + "gzip", want: Gzip},
		{name: "a megabyte of spaces", value: "br;" + huge(" ", 1<<20) + "q=0.5", want: Brotli},
		{name: "a megabyte token", value: huge("x", 1<<20) + ", gzip", want: Gzip},
		{name: "a megabyte of refusals", value: huge("gzip;q=0,", 1<<20) + ", br", want: Brotli},
	}
	p := mustNew(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := []byte(tt.value)
			keep := bytes.Clone(v)
			var a Accept
			var got Encoding
			allocs := testing.AllocsPerRun(3, func() {
				a.Reset()
				a.Add(v)
				got = p.Choose(&a)
			})
			if got != tt.want {
				t.Errorf("Choose(%.60q) = %v, want %v", tt.value, got, tt.want)
			}
			if allocs != 0 {
				t.Errorf("Add and Choose allocated %.0f times", allocs)
			}
			if !bytes.Equal(v, keep) {
				t.Error("Add changed the field's bytes")
			}
		})
	}
}

// FuzzAccept: no value makes Add or Choose panic; several fields mean
// their values joined by commas, wherever the value is cut; and Choose
// answers identity or a coding of the policy that the value names, or
// that "*" stands for.
func FuzzAccept(f *testing.F) {
	for _, s := range []string{"", "gzip", "gzip, deflate, br", "br;q=0.9, gzip;q=1", "*;q=0", "identity;q=0, *",
		"zstd;q=0.001", "gzip;q=1.0000", "gzip;q=-1", ",,,", "X-GZIP ; Q=0.5", "br;q=1.", "gzip;q=0.5;q=1"} {
		f.Add(s, len(s)/2)
	}
	p := mustNew(f, Config{})
	f.Fuzz(func(t *testing.T, value string, cut int) {
		var whole Accept
		whole.Add([]byte(value))
		got := p.Choose(&whole)
		// The same value cut at a comma into two fields.
		if i := strings.IndexByte(value[min(max(cut, 0), len(value)):], ','); i >= 0 {
			at := min(max(cut, 0), len(value)) + i
			var two Accept
			two.Add([]byte(value[:at]))
			two.Add([]byte(value[at+1:]))
			if two != whole {
				t.Fatalf("%q as one field: %+v; as %q and %q: %+v", value, whole, value[:at], value[at+1:], two)
			}
		}
		if got == Identity {
			return
		}
		named := strings.Contains(value, "*")
		lower := strings.ToLower(value)
		switch got {
		case Gzip:
			named = named || strings.Contains(lower, "gzip")
		default:
			named = named || strings.Contains(lower, got.Token())
		}
		if !named {
			t.Fatalf("Choose(%q) = %v, which the value does not name", value, got)
		}
	})
}
