package config

import (
	"fmt"
	"strings"
)

// checkHashKey says what is wrong with a hash_key value, "" if nothing.
func checkHashKey(s string) string {
	switch s {
	case "client", "path":
		return ""
	}
	kind, name, ok := strings.Cut(s, ":")
	switch kind {
	case "header", "cookie", "query":
	default:
		return fmt.Sprintf("unknown hash key %s; known: client, path, header:NAME, cookie:NAME, query:NAME%s",
			quote(s), didYouMean(kind, []string{"client", "path", "header", "cookie", "query"}))
	}
	if !ok || name == "" {
		return fmt.Sprintf("%s needs a name: %s:NAME", quote(s), kind)
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || (kind == "header" || kind == "cookie") && strings.ContainsRune(`()<>@,;:\"/[]?={}`, r) {
			return fmt.Sprintf("%s: %q is not a valid %s name", quote(s), name, kind)
		}
		if kind == "query" && (r == '&' || r == '=' || r == '#') {
			return fmt.Sprintf("%s: %q is not a valid query parameter name", quote(s), name)
		}
	}
	return ""
}
