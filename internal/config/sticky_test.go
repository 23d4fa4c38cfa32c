package config

import (
	"strings"
	"testing"
	"time"
)

// TestStickyDecodesAndFallsBack: a sticky section sets its keys over the
// defaults, and a named pool without one takes the top level's whole.
func TestStickyDecodesAndFallsBack(t *testing.T) {
	c := mustParse(t, y(
		"backends: [http://127.0.0.1:8001]",
		"sticky:",
		"  cookie: SRV",
		"  max_age: 1h",
		"  secure: true",
		"  same_site: Strict",
		"  key: 0123456789abcdef",
		"  indirect: true",
		"pools:",
		"  a:",
		"    backends: [http://127.0.0.1:8002]",
		"  b:",
		"    backends: [http://127.0.0.1:8003]",
		"    sticky:",
		"      cookie: B",
		"      http_only: false",
		"      nocache: true",
	))
	want := Sticky{Cookie: "SRV", Path: "/", MaxAge: time.Hour, HTTPOnly: true, Secure: "true", SameSite: "strict", Key: "0123456789abcdef", Indirect: true}
	if c.Sticky != want {
		t.Errorf("top level: %+v, want %+v", c.Sticky, want)
	}
	if c.Pools["a"].Sticky != want {
		t.Errorf("pool a: %+v, want the top level's %+v", c.Pools["a"].Sticky, want)
	}
	// indirect and nocache are off unless set, as HAProxy's are.
	wantB := Sticky{Cookie: "B", Path: "/", HTTPOnly: false, Secure: "auto", SameSite: "lax", NoCache: true}
	if c.Pools["b"].Sticky != wantB {
		t.Errorf("pool b: %+v, want %+v", c.Pools["b"].Sticky, wantB)
	}
	if d := mustParse(t, "backends: [http://127.0.0.1:8001]\n"); d.Sticky.On() {
		t.Errorf("sticky is on by default: %+v", d.Sticky)
	}
}

// TestStickyProblems: every bad sticky value is named with its file and
// line.
func TestStickyProblems(t *testing.T) {
	cases := []struct {
		lines []string
		line  int
		key   string
		msg   string
	}{
		{[]string{"sticky:", "  cookie: 'a b'"}, 3, "sticky.cookie", "not a cookie name"},
		{[]string{"sticky:", "  path: /x"}, 3, "sticky.cookie", "missing"},
		{[]string{"sticky:", "  cookie: S", "  path: x"}, 4, "sticky.path", "must start with /"},
		{[]string{"sticky:", "  cookie: S", "  max_age: -1s"}, 4, "sticky.max_age", "negative"},
		{[]string{"sticky:", "  cookie: S", "  max_age: 500ms"}, 4, "sticky.max_age", "whole seconds"},
		{[]string{"sticky:", "  cookie: S", "  secure: maybe"}, 4, "sticky.secure", "auto"},
		{[]string{"sticky:", "  cookie: S", "  same_site: lox"}, 4, "sticky.same_site", `did you mean "lax"`},
		{[]string{"sticky:", "  cookie: S", "  key: short"}, 4, "sticky.key", "at least 16"},
		{[]string{"sticky:", "  cookie: S", "  same_site: none", "  secure: false"}, 4, "sticky.same_site", "browsers refuse"},
		{[]string{"sticky:", "  cookie: S", "  cookies: x"}, 4, "sticky.cookies", "did you mean"},
		{[]string{"sticky: SRV"}, 2, "sticky", "must be a mapping"},
		{[]string{"sticky:", "  cookie: S", "  indirect: maybe"}, 4, "sticky.indirect", `must be true or false, got "maybe"`},
		{[]string{"sticky:", "  cookie: S", "  nocache: 'true'"}, 4, "sticky.nocache", "must be true or false"},
		{[]string{"sticky:", "  cookie: S", "  nocache: 1"}, 4, "sticky.nocache", "must be true or false"},
		{[]string{"sticky:", "  cookie: S", "  no_cache: true"}, 4, "sticky.no_cache", `did you mean "nocache"`},
		{[]string{"pools:", "  a:", "    backends: [http://127.0.0.1:8002]", "    sticky:", "      cookie: S", "      indirect: [x]"}, 7, "pools.a.sticky.indirect", "must be true or false"},
		{[]string{"pools:", "  a:", "    backends: [http://127.0.0.1:8002]", "    sticky:", "      cookie: S", "      key: short"}, 7, "pools.a.sticky.key", "at least 16"},
	}
	for _, tc := range cases {
		text := y(append([]string{"backends: [http://127.0.0.1:8001]"}, tc.lines...)...)
		_, err := Parse([]byte(text), "test.yml", testOpts)
		found := false
		for _, p := range problems(t, err) {
			if p.File == "test.yml" && p.Line == tc.line && p.Key == tc.key && strings.Contains(p.Msg, tc.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: got %v, want test.yml:%d %s: ...%s...", text, err, tc.line, tc.key, tc.msg)
		}
	}
}
