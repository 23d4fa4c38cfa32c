package route

import (
	"errors"
	"strings"
	"testing"
)

// FuzzNormalize checks the normal form's promises on any target, under
// every mode: it is a fixed point, starts with "/", holds no "//" and no
// dot segment, holds only path bytes and upper-case escapes of reserved
// bytes, and a route with a path prefix takes exactly the requests whose
// normal path lies under that prefix.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"/", "//admin", "/public/../admin", "/public/%2e%2e/admin", "/public/%2E%2E/admin",
		"/public/..%2Fadmin", "/public/..\\admin", "/./admin", "/public/%2e./admin",
		"/a/b/..?x=/../y", "/%41%2f%5C%7e", "/admin/.", "/admin%2F..", "*", "/a\xff b",
		"/s", "/s/", "/s/a//b", "/r/", "/r/a", "/q", "/q/a/../b", "/s%2F..",
	} {
		f.Add(s)
	}
	tables := make([]*Table, len(modes))
	for i, mode := range modes {
		tables[i] = mustNew(f, []Spec{
			{Name: "admin", PathPrefix: "/admin"},
			{Name: "deep", PathPrefix: "/public/a/"},
			{Name: "public", PathPrefix: "/public"},
			{Name: "strip", PathPrefix: "/s", StripPrefix: true},
			{Name: "replace", PathPrefix: "/r/", Replace: true, ReplacePrefix: "/x"},
			{Name: "replace-slash", PathPrefix: "/q", Replace: true, ReplacePrefix: "/y/"},
		}, mode)
	}
	f.Fuzz(func(t *testing.T, target string) {
		path, query, hasQuery := strings.Cut(target, "?")
		for i, mode := range modes {
			out, err := normal(path, mode)
			if err != nil {
				checkRefusal(t, mode, path, err)
				continue
			}
			checkNormal(t, mode, path, out)

			var m Match
			ok, err := tables[i].Match(request("GET", target, "h"), &m)
			if target == "*" {
				continue
			}
			if err != nil {
				t.Fatalf("%s: Match(%q): %v, but the path normalises", mode, target, err)
			}
			route := ""
			if ok {
				route = tables[i].Spec(m.Route).Name
			}
			want := out
			if sp := tables[i].Spec(max(m.Route, 0)); ok && (sp.StripPrefix || sp.Replace) {
				// The rewrite must equal normalising the plain join.
				join := sp.ReplacePrefix + "/" + out[len(sp.PathPrefix):]
				if want, err = normal(join, mode); err != nil {
					t.Fatalf("%s: %q: the join %q does not normalise: %v", mode, target, join, err)
				}
				checkNormal(t, mode, path, string(m.Target()[:len(m.Target())-len(m.Query())]))
			}
			if hasQuery {
				want += "?" + query
			}
			if string(m.Target()) != want {
				t.Fatalf("%s: Match(%q) forwards %q, want %q", mode, target, m.Target(), want)
			}
			wantRoute := ""
			switch {
			case hasSegmentPrefix([]byte(out), "/admin"):
				wantRoute = "admin"
			case hasSegmentPrefix([]byte(out), "/public/a/"):
				wantRoute = "deep"
			case hasSegmentPrefix([]byte(out), "/public"):
				wantRoute = "public"
			case hasSegmentPrefix([]byte(out), "/s"):
				wantRoute = "strip"
			case hasSegmentPrefix([]byte(out), "/r/"):
				wantRoute = "replace"
			case hasSegmentPrefix([]byte(out), "/q"):
				wantRoute = "replace-slash"
			}
			if route != wantRoute {
				t.Fatalf("%s: %q (normal %q) took route %q, want %q", mode, target, out, route, wantRoute)
			}
		}
	})
}

func checkRefusal(t *testing.T, mode EscapedSlashes, path string, err error) {
	t.Helper()
	switch {
	case errors.Is(err, ErrTarget):
		if strings.HasPrefix(path, "/") {
			t.Fatalf("%s: %q refused as not a path", mode, path)
		}
	case errors.Is(err, ErrEscapedSlash):
		l := strings.ToLower(path)
		if mode != Reject || !strings.Contains(l, "%2f") && !strings.Contains(l, "%5c") && !strings.Contains(l, "\\") {
			t.Fatalf("%s: %q refused for an escaped slash", mode, path)
		}
	case errors.Is(err, ErrEscape):
		if !strings.Contains(path, "%") {
			t.Fatalf("%s: %q refused for a bad escape without a %%", mode, path)
		}
	default:
		t.Fatalf("%s: %q: unexpected error %v", mode, path, err)
	}
}

func checkNormal(t *testing.T, mode EscapedSlashes, path, out string) {
	t.Helper()
	if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") ||
		strings.Contains(out, "/./") || strings.Contains(out, "/../") ||
		strings.HasSuffix(out, "/.") || strings.HasSuffix(out, "/..") {
		t.Fatalf("%s: normal(%q) = %q is not normal", mode, path, out)
	}
	if again, err := normal(out, mode); err != nil || again != out {
		t.Fatalf("%s: normal(%q) = %q, but normal of that = %q, %v", mode, path, out, again, err)
	}
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case c == '%':
			if i+2 >= len(out) || !isHex(out[i+1]) || !isHex(out[i+2]) ||
				strings.ToUpper(out[i+1:i+3]) != out[i+1:i+3] {
				t.Fatalf("%s: normal(%q) = %q has a bad escape at %d", mode, path, out, i)
			}
			v := unhex(out[i+1])<<4 | unhex(out[i+2])
			if unreserved[v] || mode != Keep && (v == '/' || v == '\\') {
				t.Fatalf("%s: normal(%q) = %q keeps %%%02X encoded", mode, path, out, v)
			}
			i += 2
		case c == '\\':
			if mode != Keep {
				t.Fatalf("%s: normal(%q) = %q holds a backslash", mode, path, out)
			}
		case c != '/' && !pathByte[c]:
			t.Fatalf("%s: normal(%q) = %q holds byte %#x", mode, path, out, c)
		}
	}
}
