package route

import (
	"errors"
	"testing"
)

func TestNormalize(t *testing.T) {
	// want holds the result under Reject, Decode and Keep; an entry that
	// starts with "!" is the error expected instead.
	tests := []struct {
		name string
		in   string
		want [3]string
	}{
		{"root", "/", all("/")},
		{"double slash", "//", all("/")},
		{"leading double slash", "//admin", all("/admin")},
		{"repeated slashes", "/a//b///c", all("/a/b/c")},
		{"trailing slash kept", "/a/b/", all("/a/b/")},
		{"dot", "/a/./b", all("/a/b")},
		{"leading dot", "/./admin", all("/admin")},
		{"trailing dot", "/a/.", all("/a/")},
		{"dot dot to root", "/a/..", all("/")},
		{"trailing dot dot", "/a/b/..", all("/a/")},
		{"dot dot above root", "/..", all("/")},
		{"climb far above root", "/../../x", all("/x")},
		{"dot dot", "/public/../admin", all("/admin")},
		{"encoded dot dot", "/public/%2e%2e/admin", all("/admin")},
		{"upper encoded dot dot", "/public/%2E%2E/admin", all("/admin")},
		{"half encoded dot dot", "/public/%2e./admin", all("/admin")},
		{"encoded dot", "/a/%2e/b", all("/a/b")},
		{"dot dot after slashes", "/a//..//b", all("/b")},
		{"three dots are a name", "/a/.../b", all("/a/.../b")},
		{"dot in a name", "/a/.b/c./..d", all("/a/.b/c./..d")},
		{"unreserved decoded", "/%41%62c%2D%5f%7e%30", all("/Abc-_~0")},
		{"reserved kept upper", "/%3f%3A%40%25", all("/%3F%3A%40%25")},
		{"bad escape", "/a%zz", all("!" + ErrEscape.Error())},
		{"short escape", "/a%2", all("!" + ErrEscape.Error())},
		{"lone percent", "/a%", all("!" + ErrEscape.Error())},
		{"not a path", "a/b", all("!" + ErrTarget.Error())},
		{"empty", "", all("!" + ErrTarget.Error())},
		{"bytes outside a path encoded", "/a b|c#d\"<>{}^`[]", all("/a%20b%7Cc%23d%22%3C%3E%7B%7D%5E%60%5B%5D")},
		{"non-ASCII encoded", "/\xc3\xa4", all("/%C3%A4")},
		{"sub-delims kept", "/a;b=c,d!$&'()*+:@", all("/a;b=c,d!$&'()*+:@")},
		{"encoded slash climb", "/public/..%2Fadmin",
			[3]string{"!" + ErrEscapedSlash.Error(), "/admin", "/public/..%2Fadmin"}},
		{"lower encoded slash", "/public/..%2fadmin",
			[3]string{"!" + ErrEscapedSlash.Error(), "/admin", "/public/..%2Fadmin"}},
		{"backslash climb", "/public/..\\admin",
			[3]string{"!" + ErrEscapedSlash.Error(), "/admin", "/public/..\\admin"}},
		{"encoded backslash climb", "/public/..%5cadmin",
			[3]string{"!" + ErrEscapedSlash.Error(), "/admin", "/public/..%5Cadmin"}},
		{"encoded slashes merge", "/a%2F%2Fb%2f",
			[3]string{"!" + ErrEscapedSlash.Error(), "/a/b/", "/a%2F%2Fb%2F"}},
		{"encoded dot dot slash", "/a/b/%2e%2e%2fc",
			[3]string{"!" + ErrEscapedSlash.Error(), "/a/c", "/a/b/..%2Fc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, mode := range modes {
				got, err := normal(tt.in, mode)
				want := tt.want[i]
				if want[0] == '!' {
					if err == nil || err.Error() != want[1:] {
						t.Errorf("%s: normal(%q) = %q, %v; want error %q", mode, tt.in, got, err, want[1:])
					}
					continue
				}
				if err != nil || got != want {
					t.Errorf("%s: normal(%q) = %q, %v; want %q", mode, tt.in, got, err, want)
					continue
				}
				if again, err := normal(got, mode); err != nil || again != got {
					t.Errorf("%s: normal(%q) = %q, but normal(%q) = %q, %v", mode, tt.in, got, got, again, err)
				}
			}
		})
	}
}

func all(s string) [3]string { return [3]string{s, s, s} }

// TestTraversal sends each traversal shape through a table whose routes
// send /admin and /public to different pools: under Reject and Decode none
// reaches a pool /admin would not; under Keep the escaped separator stays
// data, inside /public, and is forwarded as it was matched.
func TestTraversal(t *testing.T) {
	specs := []Spec{
		{Name: "admin", PathPrefix: "/admin", Target: 1},
		{Name: "public", PathPrefix: "/public", Target: 2},
	}
	// want: route name and backend target under Reject, Decode, Keep; "!"
	// for a 400.
	tests := []struct {
		name   string
		target string
		want   [3]string
	}{
		{"plain", "/admin", all("admin /admin")},
		{"dot dot", "/public/../admin", all("admin /admin")},
		{"encoded dot dot", "/public/%2e%2e/admin", all("admin /admin")},
		{"upper encoded dot dot", "/public/%2E%2E/admin", all("admin /admin")},
		{"double slash", "//admin", all("admin /admin")},
		{"dot", "/./admin", all("admin /admin")},
		{"half encoded", "/public/%2e./admin", all("admin /admin")},
		{"query kept", "/public/../admin?x=/../y", all("admin /admin?x=/../y")},
		{"encoded slash", "/public/..%2Fadmin",
			[3]string{"!", "admin /admin", "public /public/..%2Fadmin"}},
		{"backslash", "/public/..\\admin",
			[3]string{"!", "admin /admin", "public /public/..\\admin"}},
		{"encoded backslash", "/public/..%5Cadmin",
			[3]string{"!", "admin /admin", "public /public/..%5Cadmin"}},
		{"prefix lookalike", "/administrator", all("none /administrator")},
		{"encoded prefix", "/%61dmin/x", all("admin /admin/x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, mode := range modes {
				tab := mustNew(t, specs, mode)
				var m Match
				ok, err := tab.Match(request("GET", tt.target, "example.com"), &m)
				got := "none " + string(m.Target())
				switch {
				case err != nil:
					got = "!"
				case ok:
					got = tab.Spec(m.Route).Name + " " + string(m.Target())
				}
				if got != tt.want[i] {
					t.Errorf("%s: %q routed %q (err %v), want %q", mode, tt.target, got, err, tt.want[i])
				}
				if tt.want[i] == "!" && !errors.Is(err, ErrEscapedSlash) {
					t.Errorf("%s: %q: err %v, want ErrEscapedSlash", mode, tt.target, err)
				}
			}
		})
	}
}
