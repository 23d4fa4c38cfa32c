package trace

import (
	"strings"
	"testing"
)

// validTraceparent is W3C Trace Context's rule for a traceparent,
// written apart from ParseTraceparent to check it against.
func validTraceparent(v string) bool {
	isHex := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if !strings.ContainsRune("0123456789abcdef", rune(s[i])) {
				return false
			}
		}
		return true
	}
	if len(v) < 55 || !isHex(v[:2]) || v[:2] == "ff" || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	trace, span, flags := v[3:35], v[36:52], v[53:55]
	if !isHex(trace) || !isHex(span) || !isHex(flags) ||
		trace == strings.Repeat("0", 32) || span == strings.Repeat("0", 16) {
		return false
	}
	if v[:2] == "00" {
		return len(v) == 55
	}
	return len(v) == 55 || v[55] == '-'
}

// FuzzTraceparent: no input makes ParseTraceparent panic; it accepts
// exactly what the specification's rule does; and what it read, written
// back, is a version 00 traceparent that reads as the same parent: the
// input itself for a version 00 one, and the child relay sends is valid
// with only the flags relay knows.
func FuzzTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-" + goodTrace + "-" + goodSpan + "-01",
		"00-" + goodTrace + "-" + goodSpan + "-00",
		"00-" + goodTrace + "-" + goodSpan + "-ff",
		"01-" + goodTrace + "-" + goodSpan + "-03-what-comes-next",
		"cc-" + goodTrace + "-" + goodSpan + "-01.",
		"ff-" + goodTrace + "-" + goodSpan + "-01",
		"00-" + strings.ToUpper(goodTrace) + "-" + goodSpan + "-01",
		"00-" + strings.Repeat("0", 32) + "-" + goodSpan + "-01",
		"00-" + goodTrace + "-" + strings.Repeat("0", 16) + "-01",
		"00-" + goodTrace + "-" + goodSpan + "-01-",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		p := ParseTraceparent([]byte(v))
		if want := validTraceparent(v); p.Valid != want {
			t.Fatalf("ParseTraceparent(%q).Valid = %v, the rule says %v", v, p.Valid, want)
		}
		if !p.Valid {
			if p != (Parent{}) {
				t.Fatalf("ParseTraceparent(%q) = %+v: invalid yet not empty", v, p)
			}
			return
		}
		out := AppendTraceparent(nil, p.Trace, p.Span, p.Flags)
		if len(out) != TraceparentLen || !validTraceparent(string(out)) {
			t.Fatalf("%q written back as %q, not a valid traceparent", v, out)
		}
		if q := ParseTraceparent(out); q != p {
			t.Fatalf("%q read as %+v, written as %q, read back as %+v", v, p, out, q)
		}
		if strings.HasPrefix(v, "00") && string(out) != v {
			t.Fatalf("version 00 %q written back as %q", v, out)
		}
		if string(out[3:52]) != v[3:52] {
			t.Fatalf("ids of %q written back as %q", v, out)
		}
		for _, sampled := range []bool{false, true} {
			child := ParseTraceparent(AppendTraceparent(nil, p.Trace, NewSpanID(), p.ChildFlags(sampled)))
			if !child.Valid || child.Trace != p.Trace || child.Flags&^(FlagSampled|FlagRandom) != 0 || child.Sampled() != sampled {
				t.Fatalf("child of %q (sampled %v): %+v", v, sampled, child)
			}
		}
	})
}

// FuzzTracestate: no fields make TraceState panic; what it passes on is
// at most 512 bytes of at most 32 members with distinct keys, each a
// member of the fields, and reads back as itself; and two fields mean
// their values joined by a comma.
func FuzzTracestate(f *testing.F) {
	for _, s := range [][2]string{
		{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", ""},
		{"foo=1 \t , \t bar=2", "baz=3"},
		{"foo=1,foo=2", "foo=3"},
		{"FOO=1", "bar=2"},
		{"foo=bar=baz", ""},
		{"t@sys=1,0a_-*/@=x", ",,"},
		{members(1, 20), members(21, 13)},
		{"k=" + strings.Repeat("v", 256), "a=" + strings.Repeat("b", 200) + ",c=" + strings.Repeat("d", 200)},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		var two TraceState
		two.Add([]byte(a))
		two.Add([]byte(b))
		out := string(two.Append(nil))
		var one TraceState
		one.Add([]byte(a + "," + b))
		if got := string(one.Append(nil)); got != out {
			t.Fatalf("%q and %q as two fields: %q; as one: %q", a, b, out, got)
		}
		if one.Valid() != two.Valid() {
			t.Fatalf("%q and %q: valid %v as two fields, %v as one", a, b, two.Valid(), one.Valid())
		}
		if len(out) > MaxTraceStateLen {
			t.Fatalf("passed on %d bytes", len(out))
		}
		if out == "" {
			return
		}
		given := map[string]bool{}
		for _, m := range strings.Split(a+","+b, ",") {
			given[strings.Trim(m, " \t")] = true
		}
		keys := map[string]bool{}
		ms := strings.Split(out, ",")
		if len(ms) > MaxTraceStateMembers {
			t.Fatalf("%d members passed on", len(ms))
		}
		for _, m := range ms {
			k, _, _ := strings.Cut(m, "=")
			if keys[k] || !given[m] {
				t.Fatalf("%q passed on as %q: member %q twice or not given", a+","+b, out, m)
			}
			keys[k] = true
		}
		var again TraceState
		again.Add([]byte(out))
		if got := string(again.Append(nil)); !again.Valid() || got != out {
			t.Fatalf("%q read back as %q (valid %v)", out, got, again.Valid())
		}
	})
}
