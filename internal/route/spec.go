package route

import "errors"

// Spec is one route: plain values, in the order the routes are tried.
// The configuration decodes each entry of routes into one, judging every
// part by the rules of rules.go and the parts together by Check, which
// New applies again to whatever it is given; the data plane sets Target.
type Spec struct {
	// Name names the route in logs, metrics and Explain; New fills
	// "routes[N]" when it is empty.
	Name string

	// Hosts: the request's host must be one of these, each exact (compared
	// ignoring case) or "*.suffix" (HostPattern's rule). Empty means any
	// host.
	Hosts []string
	// Path is an exact path in normal form (Path's); "" means no
	// condition.
	Path string
	// PathPrefix is a segment-wise prefix in normal form; "" means none.
	PathPrefix string
	// Methods: the request's method must be one of these (case-sensitive).
	Methods []string
	// Headers: each must be present; a Value of "" matches any value.
	Headers []KV
	// Query: each parameter must be present; a Value of "" matches any.
	Query []KV
	// Scheme: "http" or "https" for requests that came over a cleartext
	// or a TLS listener only; "" matches both.
	Scheme string

	// StripPrefix removes PathPrefix from the forwarded path.
	StripPrefix bool
	// Replace says ReplacePrefix is set: PathPrefix is replaced by it
	// (which may be "", the same as StripPrefix).
	Replace       bool
	ReplacePrefix string
	// RequestHeaders and ResponseHeaders are applied by the data plane;
	// the table only checks and keeps them.
	RequestHeaders  HeaderOps
	ResponseHeaders HeaderOps
	// Redirect, when set, makes relay answer with a redirect instead of
	// forwarding.
	Redirect *Redirect

	// Target is the index of the pool the route sends to; the table does
	// not look at it.
	Target int
}

// KV is a name and a value, as headers and query parameters give them.
type KV struct {
	Name, Value string
}

// HeaderOps are the header changes a route makes: Set replaces every field
// of the name, Add appends a field, Remove removes every field of the name.
type HeaderOps struct {
	Set, Add []KV
	Remove   []string
}

// Redirect is a redirect answered by relay. Every part left zero comes from
// the request: the scheme, the host (without its port), the path (the one
// the backend would have got) and, always, the query.
type Redirect struct {
	// Status is 301, 302, 303, 307 or 308.
	Status int
	// Scheme is "http", "https" or "" for the request's.
	Scheme string
	// Host replaces the request's host; it carries no port.
	Host string
	// Port, when not 0, is written after the host. Without it the
	// request's own port is kept only when neither Scheme nor Host is
	// given: another scheme or host needs a port of its own.
	Port int
	// Path replaces the path; the request's query is still kept.
	Path string
}

// EscapedSlashes says what normalisation does with "%2F", "%5C" and a raw
// backslash in a path.
type EscapedSlashes uint8

const (
	// Reject refuses the request (400).
	Reject EscapedSlashes = iota
	// Decode turns each into "/", a segment separator.
	Decode
	// Keep leaves them as data, not separators.
	Keep
)

// String returns the configuration's name for the mode.
func (e EscapedSlashes) String() string {
	switch e {
	case Reject:
		return "reject"
	case Decode:
		return "decode"
	case Keep:
		return "keep"
	}
	return "invalid"
}

// Errors Match returns for a target that must be refused with 400.
var (
	// ErrEscapedSlash: "%2F", "%5C" or "\" in a path under Reject.
	ErrEscapedSlash = errors.New("route: encoded slash or backslash in the path")
	// ErrEscape: a "%" in the path that does not start an escape.
	ErrEscape = errors.New("route: malformed percent-encoding in the path")
	// ErrTarget: a target that is neither a path nor "*".
	ErrTarget = errors.New("route: request target is not a path")
)
