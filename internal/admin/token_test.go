package admin

import (
	"strings"
	"testing"
)

// TestTokenSchemeAnyCase: the bearer scheme is matched without regard to
// case and may be followed by several spaces (RFC 9110, 11.1 and 11.4);
// every other form, and every other token, is refused with 401.
func TestTokenSchemeAnyCase(t *testing.T) {
	const token = "s3cret-token-0123456789"
	a := newAdmin(t, Options{Token: token})
	for _, auth := range []string{
		"Bearer " + token, "bearer " + token, "BEARER " + token, "bEaReR " + token,
		"Bearer   " + token, "Bearer " + token + " ",
	} {
		if got := a.call(t, "GET", "/api/backends", "", "Authorization", auth); got.code != 200 {
			t.Errorf("Authorization %q: %d %q; want 200", auth, got.code, got.short())
		}
	}
	for _, fields := range [][]string{
		nil,
		{"Authorization", ""},
		{"Authorization", "Bearer"},
		{"Authorization", "Bearer "},
		{"Authorization", "Bearer" + token},
		{"Authorization", "Bearer\t" + token},
		{"Authorization", token},
		{"Authorization", "Basic " + token},
		{"Authorization", "Bearer " + token[:len(token)-1]},
		{"Authorization", "Bearer " + token + "x"},
		{"Authorization", "Bearer " + strings.ToUpper(token)},
		{"Authorization", "Bearer x"},
		{"Authorization", "Bearer " + token + " " + token},
		{"Authorization", "Bearer " + token, "Authorization", "Bearer " + token},
		{"Authorization", "Bearer wrong", "Authorization", "Bearer " + token},
	} {
		for _, path := range []string{"/api/backends", "/metrics", "/healthz", "/"} {
			got := a.call(t, "GET", path, "", fields...)
			if got.code != 401 || got.header.Get("WWW-Authenticate") != `Bearer realm="relay admin"` ||
				!strings.Contains(got.errorText(), "needs Authorization: Bearer <admin_token>") {
				t.Errorf("GET %s with %q: %d %q; want 401", path, fields, got.code, got.short())
			}
		}
		got := a.call(t, "POST", drainPath, "", append([]string{"Content-Type", "application/json"}, fields...)...)
		if got.code != 401 {
			t.Errorf("drain with %q: %d %q; want 401", fields, got.code, got.short())
		}
	}
	if s := a.state(); s != initialState() {
		t.Fatalf("requests without the token changed the pool:\n%s", s)
	}
}
