package route

import (
	"testing"

	"relay/internal/h1"
)

// request builds the request view Match reads; headers are name, value
// pairs.
func request(method, target, host string, headers ...string) *h1.Request {
	req := &h1.Request{Method: []byte(method), Target: []byte(target), Host: []byte(host)}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Fields = append(req.Fields, h1.Field{Name: []byte(headers[i]), Value: []byte(headers[i+1])})
	}
	return req
}

func mustNew(t testing.TB, specs []Spec, mode EscapedSlashes) *Table {
	t.Helper()
	tab, err := New(specs, mode)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tab
}

// normal returns the normal form of p under mode.
func normal(p string, mode EscapedSlashes) (string, error) {
	out, err := appendNormal(nil, []byte(p), mode)
	return string(out), err
}

var modes = []EscapedSlashes{Reject, Decode, Keep}
