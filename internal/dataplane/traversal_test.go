package dataplane

import (
	"strings"
	"testing"
)

// traversalYAML routes /admin to pool admin and /public, without its
// prefix, to pool public, and has no default pool.
const traversalYAML = `
pools:
  admin: {backends: [$admin]}
  public: {backends: [$public]}
routes:
  - name: admin
    match: {path_prefix: /admin}
    pool: admin
  - name: public
    match: {path_prefix: /public}
    pool: public
    strip_prefix: true
`

// traversalCase is a raw target and what must come of it under each
// escaped_slashes mode (by mode name); a mode not listed expects the same
// as "reject".
type traversalCase struct {
	target string
	want   map[string]routeCase
}

func admin(target string) routeCase  { return routeCase{status: 200, pool: "admin", target: target} }
func public(target string) routeCase { return routeCase{status: 200, pool: "public", target: target} }
func refused() routeCase             { return routeCase{status: 400} }
func noRoute() routeCase             { return routeCase{status: 404} }

var traversalCases = []traversalCase{
	{"/public/x", map[string]routeCase{"reject": public("/x")}},
	{"/admin/x", map[string]routeCase{"reject": admin("/admin/x")}},
	{"/other", map[string]routeCase{"reject": noRoute()}},
	{"/public/../admin", map[string]routeCase{"reject": admin("/admin")}},
	{"/public/../../admin/x", map[string]routeCase{"reject": admin("/admin/x")}},
	{"/public/%2e%2e/admin", map[string]routeCase{"reject": admin("/admin")}},
	{"/public/%2E%2E/admin", map[string]routeCase{"reject": admin("/admin")}},
	{"/public/%2e./admin", map[string]routeCase{"reject": admin("/admin")}},
	{"/public/.%2E/admin", map[string]routeCase{"reject": admin("/admin")}},
	{"//admin", map[string]routeCase{"reject": admin("/admin")}},
	{"/./admin", map[string]routeCase{"reject": admin("/admin")}},
	{"/public/./x/../y", map[string]routeCase{"reject": public("/y")}},
	{"/public/x/..", map[string]routeCase{"reject": public("/")}},
	{"/public/..", map[string]routeCase{"reject": noRoute()}},
	{"/%61dmin", map[string]routeCase{"reject": admin("/admin")}},
	{"/public/%2561dmin", map[string]routeCase{"reject": public("/%2561dmin")}},
	{"/public/..%2Fadmin", map[string]routeCase{
		"reject": refused(), "decode": admin("/admin"), "keep": public("/..%2Fadmin")}},
	{"/public/..%2fadmin", map[string]routeCase{
		"reject": refused(), "decode": admin("/admin"), "keep": public("/..%2Fadmin")}},
	{"/public%2F..%2Fadmin", map[string]routeCase{
		"reject": refused(), "decode": admin("/admin"), "keep": noRoute()}},
	{"/public/..%5Cadmin", map[string]routeCase{
		"reject": refused(), "decode": admin("/admin"), "keep": public("/..%5Cadmin")}},
	{`/public/..\admin`, map[string]routeCase{
		"reject": refused(), "decode": admin("/admin"), "keep": public(`/..\admin`)}},
	{"/public/%zz", map[string]routeCase{"reject": refused()}},
}

// The traversal cases of the issue, as raw HTTP/1.1 request targets and as
// raw HTTP/2 :path values, under each escaped_slashes mode: none reaches
// the admin pool unless /admin would, none reaches the public pool as a
// path that climbs out of it, and the backend gets exactly the normalised
// (and rewritten) path that was matched.
func TestRoutingTraversal(t *testing.T) {
	for _, mode := range []string{"reject", "decode", "keep"} {
		t.Run(mode, func(t *testing.T) {
			rep, _ := echoes(t, "admin", "public")
			r := startRelay(t, rep.Replace(traversalYAML+"escaped_slashes: "+mode+"\n"), Options{})
			for _, s := range sends {
				t.Run(s.proto, func(t *testing.T) {
					for _, tc := range traversalCases {
						want, ok := tc.want[mode]
						if !ok {
							want = tc.want["reject"]
						}
						want.rq = rawReq{target: tc.target, host: "www.example.com"}
						t.Run(tc.target, func(t *testing.T) {
							got := s.send(t, r.addr, want.rq)
							checkCase(t, want, got)
							if sn := got.seen(); sn != nil {
								checkContained(t, mode, tc.target, sn)
							}
						})
					}
				})
			}
		})
	}
}

// checkContained checks, whatever the case expected, that a backend got a
// path with no dot segment and no empty one, read as a backend that
// decodes escapes would read it (in keep mode only "/" separates: the
// operator has said the backends keep %2F, %5C and "\" as data), and that
// the admin pool got only paths under /admin.
func checkContained(t *testing.T, mode, sent string, sn *seen) {
	t.Helper()
	p, _, _ := strings.Cut(sn.Target, "?")
	if mode != "keep" {
		p = strings.NewReplacer("%2F", "/", "%2f", "/", "%5C", "/", "%5c", "/", `\`, "/", "%2E", ".", "%2e", ".").Replace(p)
	}
	for i, seg := range strings.Split(p, "/")[1:] {
		if seg == "." || seg == ".." || seg == "" && i < strings.Count(p, "/")-1 {
			t.Errorf("%q reached pool %s as %q, which a backend reads with a dot or empty segment", sent, sn.Who, sn.Target)
		}
	}
	if sn.Who == "admin" && p != "/admin" && !strings.HasPrefix(p, "/admin/") {
		t.Errorf("%q reached pool admin as %q, not under /admin", sent, sn.Target)
	}
}
