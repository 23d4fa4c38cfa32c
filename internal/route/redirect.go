package route

import (
	"bytes"
	"errors"
	"strconv"

	"relay/internal/h1"
)

// ErrNoHost: a redirect that takes the request's host, for a request
// without a valid one.
var ErrNoHost = errors.New("route: redirect needs the request's host, and it has none")

// requestPort returns ":PORT" of a Host value, or nil when it has none.
// An empty port ("example.com:", which RFC 3986 allows) is none: the
// Location names the default port by leaving it out.
func requestPort(h []byte) []byte {
	i := bytes.LastIndexByte(h, ':')
	if i < 0 || i == len(h)-1 || bytes.IndexByte(h[i:], ']') >= 0 {
		return nil
	}
	return h[i:]
}

// Redirect builds the answer of the matched route's redirect into m's own
// buffer: the status and the Location, an absolute URL. scheme is the
// request's ("http" or "https"), used when the redirect names none. The
// Location is valid until the next use of m. ok is false when the matched
// route does not redirect.
func (t *Table) Redirect(m *Match, req *h1.Request, scheme string) (status int, location []byte, ok bool, err error) {
	if m.Route < 0 || t.routes[m.Route].spec.Redirect == nil {
		return 0, nil, false, nil
	}
	r := t.routes[m.Route].spec.Redirect
	if r.Scheme != "" {
		scheme = r.Scheme
	}
	loc := append(m.loc[:0], scheme...)
	loc = append(loc, "://"...)
	if r.Host != "" {
		loc = append(loc, r.Host...)
	} else {
		var hostOK bool
		if loc, hostOK = appendHost(loc, req.Host); !hostOK {
			m.loc = loc[:0]
			return 0, nil, true, ErrNoHost
		}
	}
	switch {
	case r.Port != 0:
		loc = append(loc, ':')
		loc = strconv.AppendInt(loc, int64(r.Port), 10)
	case r.Scheme == "" && r.Host == "":
		// Same scheme, same host: the same port, so that a moved page
		// on :8080 stays on :8080. Another scheme or host needs its own.
		loc = append(loc, requestPort(req.Host)...)
	}
	switch {
	case r.Path != "":
		loc = append(loc, r.Path...)
	case len(m.path) == 1 && m.path[0] == '*':
		loc = append(loc, '/')
	default:
		loc = append(loc, m.target[:m.query]...)
	}
	loc = append(loc, m.Query()...)
	m.loc = loc
	return r.Status, loc, true, nil
}
