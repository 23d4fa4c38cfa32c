package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// tokenGuard refuses requests without the bearer token, when one is set.
//
// The credentials are compared as SHA-256 digests, in constant time: the
// digests have one length whatever was sent, so the time taken says
// neither how much of the token matched nor how long it is. The scheme is
// matched without regard to case, as RFC 9110 (section 11.1) has it, and
// one or more spaces may follow it (section 11.4); anything else (another
// scheme, a tab, no token, a second Authorization field) is refused.
func tokenGuard(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Values("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay admin"`)
			writeError(w, http.StatusUnauthorized, "this admin listener needs Authorization: Bearer <admin_token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the credentials of a single "Bearer TOKEN" Authorization
// value; ok is false when there is none or the form is wrong.
func bearer(values []string) (token string, ok bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, rest, found := strings.Cut(values[0], " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	rest = strings.TrimLeft(rest, " ")
	return rest, rest != ""
}
