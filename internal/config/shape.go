package config

import (
	"fmt"
	"slices"
	"strings"
)

// topKeys are the top-level keys, for messages about keys found elsewhere.
// An init function sets them: the decoding functions that report those
// messages are part of fields itself.
var topKeys []string

func init() { topKeys = Keys() }

// misplacedKey explains a key that relay knows, but at another level of
// the file than where it stands: a backend's weight at the top level, a
// top-level setting inside a backend. prefix is where the key was found
// ("" at the top level, "backends[2]." in a backend). It returns "" for a
// key that is unknown everywhere.
func misplacedKey(name, prefix string) string {
	top := prefix == ""
	inBackend := strings.HasPrefix(prefix, "backends[") || strings.Contains(prefix, ".backends[")
	inPool := strings.HasPrefix(prefix, "pools.") && strings.Count(prefix, ".") == 2
	switch {
	case inPool && slices.Contains(upstreamTLSKeys, name):
		return fmt.Sprintf("unknown key in a pool; did you mean %q (the default for the pool's https backends)? "+
			"For one backend, indent it under that backend's \"- url:\", lined up with url", "backend_"+name)
	case inPool && slices.Contains(backendKeys, name):
		return "unknown key in a pool; it belongs to a backend: indent it under the backend's \"- url:\" in the pool's backends, lined up with url"
	case inPool && slices.Contains(topKeys, name):
		return "not a pool setting: it applies to relay as a whole; move it to the top level"
	case top && slices.Contains(upstreamTLSKeys, name):
		return fmt.Sprintf("unknown key at the top level; did you mean %q (the default for every https backend)? "+
			"For one backend, indent it under that backend's \"- url:\", lined up with url", "backend_"+name)
	case top && slices.Contains(backendKeys, name):
		return "unknown key at the top level; it belongs to a backend: indent it under the backend's \"- url:\", lined up with url"
	case top && slices.Contains(discoveryKeys, name):
		return "unknown key at the top level; it belongs under discovery:"
	case inBackend && slices.Contains(backendKeys, strings.TrimPrefix(name, "backend_")):
		return fmt.Sprintf("unknown key in a backend; did you mean %q? (%s is the top-level default for every backend)",
			strings.TrimPrefix(name, "backend_"), name)
	case inBackend && slices.Contains(topKeys, name):
		return "unknown key in a backend; it is a top-level setting: move it out of the backends list, to the start of its own line"
	}
	return ""
}

// urlShape explains a backend URL that is really YAML of another shape:
// "url:http://..." (a key without its space, read as one string) or a URL
// with a key folded into it ("http://127.0.0.1:8001 weight:2": YAML
// continues a plain value on a line indented deeper than its "- " or
// key). It returns "" for anything else.
func urlShape(s string) string {
	s = strings.TrimSpace(s)
	if g := gluedKey.FindStringSubmatch(s); g != nil && slices.Contains(backendKeys, g[1]) {
		return fmt.Sprintf("%s: a key needs a space after its colon: write %s", quote(s), quote(g[1]+": "+g[2]))
	}
	url, rest, found := strings.Cut(s, " ")
	if !found {
		return ""
	}
	rest = strings.Join(strings.Fields(rest), " ")
	key := rest
	if g := gluedKey.FindStringSubmatch(rest); g != nil {
		key = g[1] + ": " + g[2]
	}
	name, _, _ := strings.Cut(key, ":")
	if !slices.Contains(backendKeys, name) {
		return fmt.Sprintf("%s holds a space, which no URL does; if the next line was meant as a key of this backend, "+
			"write the backend as \"- url: %s\" with the key on the next line, under url", quote(s), url)
	}
	return fmt.Sprintf("%s is the URL with %s folded into it: YAML continues a value on a line indented deeper than its \"- \" or key. "+
		"Write the backend as \"- url: %s\" with %s on the next line, under url", quote(s), quote(rest), url, quote(key))
}
