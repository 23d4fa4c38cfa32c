package main

import (
	"fmt"
	"io"
	"strings"

	"relay/internal/config"
	"relay/internal/dataplane"
)

// headerFlags collects -header "Name: value" flags.
type headerFlags [][2]string

func (h *headerFlags) String() string { return "" }

func (h *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("header %q is not \"Name: value\"", s)
	}
	*h = append(*h, [2]string{strings.TrimSpace(name), strings.TrimSpace(value)})
	return nil
}

// explain prints how cfg routes the request -explain names: 0 when a pool
// or a redirect takes it, 1 when relay would answer 404 or 400, 2 when
// the request is not "METHOD URL".
func explain(cfg *config.Config, f *flags, stdout, stderr io.Writer) int {
	method, target, ok := strings.Cut(strings.TrimSpace(f.explain), " ")
	target = strings.TrimSpace(target)
	if !ok || method == "" || target == "" || strings.ContainsAny(target, " \t") {
		fmt.Fprintf(stderr, "relay: -explain %q: want \"METHOD URL\", e.g. \"GET https://api.example.com/v1/users\" or \"GET /v1/users\" with -header \"Host: api.example.com\"\n", f.explain)
		return 2
	}
	text, served, err := dataplane.Explain(cfg, method, target, f.headers)
	if err != nil {
		fmt.Fprintln(stderr, "relay:", err)
		return 1
	}
	io.WriteString(stdout, text)
	if !served {
		return 1
	}
	return 0
}
