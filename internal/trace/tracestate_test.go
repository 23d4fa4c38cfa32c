package trace

import (
	"fmt"
	"strings"
	"testing"
)

// traceState gathers fields and returns what relay passes on.
func traceState(fields ...string) string {
	var ts TraceState
	for _, f := range fields {
		ts.Add([]byte(f))
	}
	return string(ts.Append(nil))
}

// members returns "k01=v,k02=v,..." of n members, the keys from first.
func members(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "k%02d=v", i)
	}
	return b.String()
}

// The cases of W3C Trace Context's test suite (test/test.py) for a
// vendor that validates tracestate, and the limits of the specification.
func TestTraceState(t *testing.T) {
	key256 := "k" + strings.Repeat("z", 255)
	value256 := strings.Repeat("v", 256)
	allChars := func() string {
		var b strings.Builder
		for c := 0x20; c <= 0x7e; c++ {
			if c != ',' && c != '=' {
				b.WriteByte(byte(c))
			}
		}
		return b.String()
	}()
	tests := []struct {
		name   string
		fields []string
		want   string
	}{
		{name: "none", fields: nil, want: ""},
		{name: "empty field", fields: []string{""}, want: ""},
		{name: "one", fields: []string{"foo=1"}, want: "foo=1"},
		{name: "two", fields: []string{"foo=1,bar=2"}, want: "foo=1,bar=2"},
		{name: "empty field before", fields: []string{"", "foo=1"}, want: "foo=1"},
		{name: "empty field after", fields: []string{"foo=1", ""}, want: "foo=1"},
		{name: "several fields in order", fields: []string{"foo=1,bar=2", "rojo=1,congo=2", "baz=3"}, want: "foo=1,bar=2,rojo=1,congo=2,baz=3"},
		{name: "OWS around members", fields: []string{"foo=1 \t , \t bar=2, \t baz=3"}, want: "foo=1,bar=2,baz=3"},
		{name: "leading space", fields: []string{" foo=1"}, want: "foo=1"},
		{name: "trailing tab", fields: []string{"foo=1\t"}, want: "foo=1"},
		{name: "empty members", fields: []string{",foo=1,, ,\t,bar=2,"}, want: "foo=1,bar=2"},
		{name: "a value's leading spaces are its own", fields: []string{"foo=  1"}, want: "foo=  1"},
		{name: "duplicate keys keep the first", fields: []string{"foo=1,foo=2"}, want: "foo=1"},
		{name: "duplicate keys across fields", fields: []string{"foo=1", "bar=3", "foo=2"}, want: "foo=1,bar=3"},
		{name: "same member twice", fields: []string{"foo=1", "foo=1"}, want: "foo=1"},
		{name: "every allowed value character", fields: []string{"foo=" + allChars}, want: "foo=" + allChars},
		{name: "every allowed key character", fields: []string{"0az_-*/@9=1"}, want: "0az_-*/@9=1"},
		{name: "multi-tenant keys", fields: []string{"foo@=1,foo@@bar=1,foo@bar@baz=1,t@sys=2"}, want: "foo@=1,foo@@bar=1,foo@bar@baz=1,t@sys=2"},
		{name: "32 members", fields: []string{members(1, 10), members(11, 10), members(21, 10), members(31, 2)}, want: members(1, 32)},
		{name: "33 members", fields: []string{members(1, 10), members(11, 10), members(21, 10), members(31, 3)}, want: ""},
		{name: "key of 256", fields: []string{"foo=1", key256 + "=1"}, want: "foo=1," + key256 + "=1"},
		{name: "key of 257", fields: []string{"foo=1", "z" + key256 + "=1"}, want: ""},
		{name: "value of 256", fields: []string{"foo=" + value256}, want: "foo=" + value256},
		{name: "value of 257", fields: []string{"foo=v" + value256}, want: ""},
		{name: "space in a key", fields: []string{"foo =1"}, want: ""},
		{name: "upper-case key", fields: []string{"FOO=1"}, want: ""},
		{name: "dot in a key", fields: []string{"foo.bar=1"}, want: ""},
		{name: "key starting with @", fields: []string{"@foo=1,bar=2"}, want: ""},
		{name: "key starting with _", fields: []string{"_foo=1"}, want: ""},
		{name: "no key", fields: []string{"=1"}, want: ""},
		{name: "no =", fields: []string{"foo"}, want: ""},
		{name: "= in a value", fields: []string{"foo=bar=baz"}, want: ""},
		{name: "empty value", fields: []string{"foo=,bar=3"}, want: ""},
		{name: "space for a value", fields: []string{"foo= "}, want: ""},
		{name: "tab in a value", fields: []string{"foo=a\tb"}, want: ""},
		{name: "control byte", fields: []string{"foo=a\x01b"}, want: ""},
		{name: "byte past ASCII", fields: []string{"foo=caf\xc3\xa9"}, want: ""},
		{name: "one bad field spoils all", fields: []string{"foo=1", "BAD=2", "bar=3"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := traceState(tt.fields...); got != tt.want {
				t.Errorf("tracestate %q passed on as %q, want %q", tt.fields, got, tt.want)
			}
		})
	}
}

// A tracestate longer than 512 bytes is cut by whole entries: those over
// 128 characters first, from the right, then from the right.
func TestTraceStateTruncation(t *testing.T) {
	big := func(k string) string { return k + "=" + strings.Repeat("b", 200) }  // 203 bytes
	small := func(k string) string { return k + "=" + strings.Repeat("s", 98) } // 101 bytes
	tests := []struct {
		name   string
		fields []string
		want   string
	}{
		{name: "512 exactly", fields: []string{small("a1") + "," + small("a2") + "," + small("a3") + "," + small("a4") + "," + "a5=" + strings.Repeat("x", 101)},
			want: small("a1") + "," + small("a2") + "," + small("a3") + "," + small("a4") + "," + "a5=" + strings.Repeat("x", 101)},
		{name: "large entries go first, from the right", fields: []string{big("b1"), small("s1"), big("b2"), small("s2"), big("b3")},
			want: big("b1") + "," + small("s1") + "," + small("s2")},
		{name: "then from the right", fields: []string{small("s1") + "," + small("s2") + "," + small("s3") + "," + small("s4") + "," + small("s5") + "," + small("s6")},
			want: small("s1") + "," + small("s2") + "," + small("s3") + "," + small("s4") + "," + small("s5")},
		{name: "one field over 512 keeps its first entries", fields: []string{members(1, 20) + "," + big("b1") + "," + big("b2") + "," + big("b3")},
			want: members(1, 20) + "," + big("b1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := traceState(tt.fields...)
			if got != tt.want {
				t.Errorf("passed on %d bytes %q\nwant %d bytes %q", len(got), got, len(tt.want), tt.want)
			}
			if len(got) > MaxTraceStateLen {
				t.Errorf("passed on %d bytes, more than %d", len(got), MaxTraceStateLen)
			}
		})
	}
}

// A hostile tracestate costs one pass at most, no allocation, and what
// is kept of it is views, never a copy.
func TestTraceStateHostile(t *testing.T) {
	for _, v := range []string{
		strings.Repeat(",", 1<<20) + "foo=1",
		strings.Repeat(" ", 1<<20),
		"foo=" + strings.Repeat("v", 1<<20),
		strings.Repeat("foo=1,", 1<<18),
		members(1, 32) + "," + strings.Repeat("x", 1<<20),
	} {
		var ts TraceState
		b := []byte(v)
		dst := make([]byte, 0, MaxTraceStateLen)
		var out []byte
		allocs := testing.AllocsPerRun(3, func() {
			ts.Reset()
			ts.Add(b)
			out = ts.Append(dst[:0])
		})
		if allocs != 0 {
			t.Errorf("%.40q...: %.0f allocations", v, allocs)
		}
		if len(out) > MaxTraceStateLen {
			t.Errorf("%.40q...: passed on %d bytes", v, len(out))
		}
	}
	// A member past the 32nd stops the reading: the rest is not looked at.
	var ts TraceState
	ts.Add([]byte(members(1, 33)))
	if ts.Valid() || ts.Len() != 32 {
		t.Fatalf("33 members: valid %v, %d kept", ts.Valid(), ts.Len())
	}
}
