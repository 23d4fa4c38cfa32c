package route

import "fmt"

// Problem is one thing wrong with a Spec.
type Problem struct {
	// Key names the part that holds it as the configuration file does:
	// "replace_prefix", "match.path", "redirect.path".
	Key string
	// Msg says what is wrong and, where it helps, what would be right.
	Msg string
}

// Check judges the parts of s together, and its paths against mode, the
// table's: what a route needs of its parts to be built at all, beyond
// what each part needs on its own. The parts themselves are judged by the
// rules of rules.go, which the caller (New, or the configuration as it
// reads each value) has applied; a part one of them refused is left out
// of s, so it is not judged again here. (What a file should not say
// although a table could be built from it, such as a redirect to the URL
// asked for, is the configuration's to refuse.)
//
// cite names another key in a message about one key: the key itself, or
// the key and where it is written ("strip_prefix (line 9)"); nil names
// the key alone.
func (s *Spec) Check(mode EscapedSlashes, cite func(key string) string) []Problem {
	if cite == nil {
		cite = func(key string) string { return key }
	}
	var ps []Problem
	bad := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if s.StripPrefix && s.Replace {
		bad("replace_prefix", "%s and replace_prefix both rewrite match.path_prefix; keep one", cite("strip_prefix"))
	}
	rewrite := s.Rewrite()
	if rewrite != "" && s.PathPrefix == "" {
		why := "this route has none"
		if s.Path != "" {
			why = "this route matches an exact path; to send another path, use redirect with path, or a path_prefix"
		}
		bad(rewrite, "%s rewrites the part of the path match.path_prefix matched, and %s", rewrite, why)
	}
	if mode == Keep {
		return ps
	}
	// A request path holds an escaped slash only under keep, so a route's
	// path with one could never match; and a path relay writes is held to
	// the same form, so a rewrite or a redirect never gives a backend or a
	// client an escaped slash that escaped_slashes keeps away from every
	// request path.
	for _, f := range []struct{ key, path string }{{"match.path_prefix", s.PathPrefix}, {"match.path", s.Path}} {
		if escapedSlash(f.path) {
			bad(f.key, "%s holds an escaped slash (%%2F or %%5C), which a request path has when it is matched only with escaped_slashes: keep (it is %s)", quote(f.path), mode)
		}
	}
	written := []struct{ key, path string }{{"replace_prefix", s.ReplacePrefix}}
	if s.Redirect != nil {
		written = append(written, struct{ key, path string }{"redirect.path", s.Redirect.Path})
	}
	for _, f := range written {
		if escapedSlash(f.path) {
			bad(f.key, "%s holds an escaped slash (%%2F or %%5C), which relay gives a backend or a client only with escaped_slashes: keep (it is %s)", quote(f.path), mode)
		}
	}
	return ps
}

// Rewrite names the part that rewrites s's path prefix, "strip_prefix"
// or "replace_prefix"; "" when s has none, or both (which Check refuses).
func (s *Spec) Rewrite() string {
	switch {
	case s.StripPrefix && s.Replace:
	case s.StripPrefix:
		return "strip_prefix"
	case s.Replace:
		return "replace_prefix"
	}
	return ""
}

// Empty reports whether h changes nothing.
func (h HeaderOps) Empty() bool { return len(h.Set) == 0 && len(h.Add) == 0 && len(h.Remove) == 0 }
