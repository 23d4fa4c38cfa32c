package core

import (
	"bytes"
	"sync/atomic"
	"time"
)

// ACME's HTTP-01 challenge (RFC 8555 section 8.3): the CA asks
// http://NAME/.well-known/acme-challenge/TOKEN on port 80 and wants the
// key authorization of the challenge in flight for NAME as the body. The
// answer is relay's own, before routing: no route, redirect, rate limit
// or backend may stand in its way, as a route that sends all cleartext
// to https would.

// acmePath starts the path of every HTTP-01 request.
const acmePath = "/.well-known/acme-challenge/"

// maxACMEToken bounds the tokens looked up; a CA's are 43 characters
// (128 bits, base64url), and RFC 8555 asks for at least 22.
const maxACMEToken = 128

// HTTP01Answers finds the answers to HTTP-01 challenges (acme.Serving in
// a serving process, which asks the control).
type HTTP01Answers interface {
	// HTTP01 returns the key authorization answering token for host (a
	// name relay orders, in lower case): found is false when no HTTP-01
	// challenge with that token is in flight for host; err says the
	// lookup itself failed (the control too busy or too slow).
	HTTP01(host, token string) (answer string, found bool, err error)
}

// ACMEChallenges is the feature answering HTTP-01 challenges for the
// names relay orders, at the end of the accept phase (an Answerer).
type ACMEChallenges struct {
	// names are the hosts answered for, swapped whole by SetNames;
	// requests read them without a lock.
	names   atomic.Pointer[map[string]struct{}]
	answers HTTP01Answers
}

// NewACMEChallenges returns the feature answering the HTTP-01 challenges
// for names (lower case, no trailing dot) from answers. A request for
// another host, or another path, passes untouched; one for a name of
// names on the challenge path gets 200 text/plain with the key
// authorization, or 404 when no challenge with its token is in flight.
// Without names it answers nothing until SetNames gives it some.
func NewACMEChallenges(names []string, answers HTTP01Answers) *ACMEChallenges {
	f := &ACMEChallenges{answers: answers}
	f.SetNames(names)
	return f
}

// SetNames makes names the hosts answered for, in place of the ones
// before (a reload that changes acme.domains); requests in flight
// finish under the names they started with.
func (f *ACMEChallenges) SetNames(names []string) {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	f.names.Store(&m)
}

// FeatureName names the feature for relay -explain.
func (*ACMEChallenges) FeatureName() string { return "ACME http-01 challenges answered" }

// AnswerFirst answers x when it asks for a challenge of a name relay
// orders.
func (f *ACMEChallenges) AnswerFirst(x *Exchange, _ time.Time) (Outcome, bool) {
	t := x.Req.Target
	if len(t) < len(acmePath) || string(t[:len(acmePath)]) != acmePath {
		return Outcome{}, false
	}
	var buf [maxHostName]byte
	host, ok := hostName(x.Req.Host, &buf)
	if !ok {
		return Outcome{}, false
	}
	if _, ok := (*f.names.Load())[string(host)]; !ok {
		return Outcome{}, false
	}
	token := t[len(acmePath):]
	if !isACMEToken(token) || f.answers == nil {
		return x.answerError(404, "no ACME challenge in flight for this token", false), true
	}
	answer, found, err := f.answers.HTTP01(string(host), string(token))
	switch {
	case err != nil:
		return x.answerError(503, "ACME challenge not looked up: "+err.Error(), false), true
	case !found:
		return x.answerError(404, "no ACME challenge in flight for this token", false), true
	}
	return x.answerText(200, []byte(answer)), true
}

// maxHostName bounds a host name (RFC 1035: 253 characters written out,
// and a trailing dot).
const maxHostName = 255

// hostName is the name a Host field's value (or an :authority) names,
// in lower case in buf: its port and one trailing dot left out. ok is
// false for an IP address in brackets, an empty value or one too long to
// be a name.
func hostName(h []byte, buf *[maxHostName]byte) (name []byte, ok bool) {
	if len(h) > 0 && h[0] == '[' {
		return nil, false
	}
	if i := bytes.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	h = bytes.TrimSuffix(h, []byte("."))
	if len(h) == 0 || len(h) > maxHostName {
		return nil, false
	}
	n := copy(buf[:], h)
	for i, c := range buf[:n] {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	return buf[:n], true
}

// isACMEToken reports whether t can be a token: base64url characters
// (RFC 8555 section 8.3), at most maxACMEToken of them.
func isACMEToken(t []byte) bool {
	if len(t) == 0 || len(t) > maxACMEToken {
		return false
	}
	for _, c := range t {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}
