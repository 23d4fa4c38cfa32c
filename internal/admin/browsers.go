package admin

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// The admin API has no cookies or sessions, but a web page the operator's
// browser opens can still send it requests: a form POST or a no-cors
// fetch from another origin reaches a loopback listener without a token,
// and after DNS rebinding a page on the attacker's name can even read the
// answers. browserGuard refuses every such request before any route sees
// it, whether or not admin_token is set:
//
//   - Host must name this listener (hostRules), so a rebound name gets
//     421 on every route, the dashboard, /metrics and pprof included;
//   - a CORS preflight (OPTIONS) is refused and no answer carries CORS
//     headers, so a page on another origin cannot send what needs one;
//   - Origin, when sent, must be this listener's own origin;
//   - Sec-Fetch-Site, when sent, must be same-origin or none (typed,
//     bookmarked), except for a plain navigation to the dashboard page;
//     same-site is refused too, as a page on localhost:8000 is same-site
//     to localhost:9901;
//   - a request that changes something (any method but GET and HEAD)
//     must be Content-Type: application/json, which a page on another
//     origin cannot send without the preflight relay refuses (a form or
//     a no-cors fetch can only send text/plain, url-encoded or multipart
//     bodies).

// maxShown bounds how much of a refused header value an error repeats.
const maxShown = 100

// hostRules decides which Host header values name the admin listener.
type hostRules struct {
	// names are allowed on any port: the configured names given without
	// a port and the admin listener's own host name.
	names map[string]bool
	// exact are the configured HOST:PORT entries, as written in a Host
	// header.
	exact map[string]bool
	// use is the address a refusal tells the client to use instead.
	use string
}

// newHostRules reads admin_allowed_hosts entries (HOST or HOST:PORT, in
// config.ParseAllowedHost's form); addr is the address the listener is
// bound to, "" when unknown.
func newHostRules(allowed []string, addr string) *hostRules {
	h := &hostRules{names: map[string]bool{}, exact: map[string]bool{}, use: "such as 127.0.0.1:9901 or localhost:9901"}
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if a, err := netip.ParseAddr(host); err == nil && (a.IsUnspecified() || a.IsLoopback()) {
			host = "localhost" // what an operator on this machine types
		}
		h.use = net.JoinHostPort(host, port)
	}
	for _, e := range allowed {
		e = strings.ToLower(e)
		if _, _, err := net.SplitHostPort(e); err == nil {
			h.exact[e] = true
			continue
		}
		h.names[strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")] = true
	}
	return h
}

// allows reports whether host, a request's Host, names the admin listener
// for a request that arrived on the local address local:
//
//   - an admin_allowed_hosts entry: a name alone on any port, HOST:PORT
//     exactly;
//   - the IP address the connection arrived on, which is how Prometheus
//     scrapes and Kubernetes probes by pod IP, and how a browser reaches
//     a listener on 127.0.0.1 or 0.0.0.0;
//   - localhost or a loopback address, on a connection that arrived over
//     loopback.
//
// Ports are not compared for the last two. DNS rebinding needs a name the
// attacker controls, and the port adds nothing against it, while an SSH
// tunnel, kubectl port-forward or a published container port make the
// port the client used differ from the one relay listens on. Where the
// port matters, for a web page's Origin, it is compared exactly.
func (h *hostRules) allows(host string, local netip.Addr) bool {
	host = strings.ToLower(host)
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		// No port: the form a browser uses for port 80.
		name = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	} else if h.exact[host] {
		return true
	}
	if name == "" {
		return false
	}
	if h.names[name] {
		return true
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return a == local || a.IsLoopback() && local.IsLoopback()
	}
	return name == "localhost" && local.IsLoopback()
}

// allowsOrigin reports whether origin, a request's Origin header, is the
// admin listener's own: http or https and the request's Host, or an
// admin_allowed_hosts entry as written (a name alone standing for the
// scheme's default port). "null", sent by sandboxed and file pages, is
// refused.
func (h *hostRules) allowsOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	o := strings.ToLower(u.Host)
	if o == strings.ToLower(host) || h.exact[o] {
		return true
	}
	_, _, err = net.SplitHostPort(o)
	return err != nil && h.names[strings.TrimSuffix(strings.TrimPrefix(o, "["), "]")]
}

// localAddr is the address the request's connection arrived on, or the
// zero Addr when the server did not record it.
func localAddr(r *http.Request) netip.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// browserGuard wraps next with the checks described at the top of this
// file.
func browserGuard(h *hostRules, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.allows(r.Host, localAddr(r)) {
			writeError(w, http.StatusMisdirectedRequest, "Host "+quote(shorten(r.Host))+" does not name this admin listener; "+
				"relay refuses it so that no web page can reach the admin API through DNS rebinding. "+
				"Use the listener's address ("+h.use+"), or list the name in admin_allowed_hosts")
			return
		}
		if r.Method == http.MethodOptions {
			writeError(w, http.StatusForbidden, "the admin API answers no CORS preflight: web pages on other origins may not call it")
			return
		}
		if origins := r.Header.Values("Origin"); len(origins) > 1 || len(origins) == 1 && !h.allowsOrigin(origins[0], r.Host) {
			writeError(w, http.StatusForbidden, "Origin "+quote(shorten(strings.Join(origins, ", ")))+
				" is not this admin listener's own; the admin API refuses requests sent by web pages on other origins")
			return
		}
		if site := r.Header.Values("Sec-Fetch-Site"); len(site) > 0 && !sameSite(r, site) {
			writeError(w, http.StatusForbidden, "Sec-Fetch-Site "+quote(shorten(strings.Join(site, ", ")))+
				": the admin API refuses requests sent by web pages on other origins; open the dashboard at the listener's own address")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if ct := r.Header.Values("Content-Type"); !isJSON(ct) {
				got := "none"
				if len(ct) > 0 {
					got = quote(shorten(strings.Join(ct, ", ")))
				}
				writeError(w, http.StatusUnsupportedMediaType, r.Method+" on the admin API needs Content-Type: application/json, "+
					"even without a body (got "+got+"), so that web pages on other sites cannot send it; "+
					`with curl: -H 'Content-Type: application/json', or --json '{...}'`)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// sameSite reports whether the Sec-Fetch-Site values the browser sent
// allow the request: same-origin, or none (the user typed the address or
// opened a bookmark). A link to the dashboard from another site is a
// navigation the linking page can neither see nor script, so the page
// itself may load that way; its calls to the API are then same-origin.
func sameSite(r *http.Request, values []string) bool {
	if len(values) != 1 {
		return false
	}
	switch values[0] {
	case "same-origin", "none":
		return true
	}
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/" &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// isJSON reports whether a request's Content-Type values are exactly one
// application/json, parameters (charset) allowed.
func isJSON(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mt, _, err := mime.ParseMediaType(values[0])
	return err == nil && mt == "application/json"
}

// shorten cuts a header value an error repeats to maxShown bytes.
func shorten(s string) string {
	if len(s) > maxShown {
		return s[:maxShown] + "..."
	}
	return s
}
