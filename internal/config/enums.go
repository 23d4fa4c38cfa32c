package config

import (
	"fmt"
	"slices"
	"strings"
)

// otherNames maps what other load balancers call an algorithm, or a
// short form of a name, to relay's name for it: someone coming from nginx
// writes least_conn or ip_hash, from HAProxy source, from Envoy maglev;
// an upstream protocol written as http2 is h2.
// A name maps only when relay registers its target.
var otherNames = map[string]string{
	"rr":                   "round-robin",
	"weighted":             "weighted-round-robin",
	"wrr":                  "weighted-round-robin",
	"weighted-rr":          "weighted-round-robin",
	"least-connections":    "least-conn",
	"leastconnections":     "least-conn",
	"least-connection":     "least-conn",
	"power-of-two":         "p2c",
	"power-of-two-choices": "p2c",
	"two-choices":          "p2c",
	"hash":                 "ip-hash",
	"source":               "ip-hash",
	"source-ip":            "ip-hash",
	"client-ip":            "ip-hash",
	"maglev":               "ip-hash",
	"consistent-hash":      "ip-hash",
	"http":                 "http/1.1",
	"http1":                "http/1.1",
	"http/1":               "http/1.1",
	"http1.1":              "http/1.1",
	"h1":                   "http/1.1",
	"http2":                "h2",
	"http/2":               "h2",
	"warning":              "warn",
	"err":                  "error",
	"trace":                "debug",
}

// didYouMean returns `; did you mean "X"?` naming the value of known that
// v most likely stands for, or "", for the end of a message.
func didYouMean(v string, known []string) string {
	if s := closest(v, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// closest is the value of known that v most likely stands for, or "".
// Case, '_' for '-' and the names other load balancers use are forgiven
// before edit distance is tried.
func closest(v string, known []string) string {
	n := strings.ToLower(strings.TrimSpace(v))
	n = strings.NewReplacer("_", "-", " ", "-").Replace(n)
	if slices.Contains(known, n) {
		return n
	}
	if s, ok := otherNames[n]; ok && slices.Contains(known, s) {
		return s
	}
	if s := suggest(n, known); s != "" {
		return s
	}
	// TLSv1.3, tls1.2, "TLS 1.2": the version without its prefix.
	if s := strings.TrimLeft(strings.TrimPrefix(n, "tls"), "v-"); s != n && slices.Contains(known, s) {
		return s
	}
	return ""
}
