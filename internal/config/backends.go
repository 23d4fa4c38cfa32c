package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var backendKeys = append([]string{"url", "weight", "max_requests", "protocol"}, upstreamTLSKeys...)

// decodeBackends reads the backends list. An entry is a mapping with url and
// an optional weight, or just the URL string (weight 1). Entries whose URL
// cannot even be parsed are dropped after reporting; everything else is kept
// for validation so its other problems are found too.
func decodeBackends(d *decoder, c *Pool, v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, path, "must be a list of backends (- url: http://HOST:PORT), got %s", describe(v))
		c.backendProblems++
		return
	}
	for i, item := range v.Content {
		item = resolve(item)
		prefix := fmt.Sprintf("%s[%d]", path, i)
		b := Backend{Weight: DefaultWeight, Line: item.Line, key: prefix}
		var raw *yaml.Node
		switch {
		case item.Kind == yaml.ScalarNode && item.ShortTag() == "!!str":
			raw = item
		case item.Kind == yaml.MappingNode:
			d.mapping(item, prefix+".", backendKeys, func(key string, k, val *yaml.Node) {
				if isNull(val) {
					return // as at the top level, an empty value keeps the default
				}
				switch key {
				case "url":
					raw = val
				case "weight":
					b.weightLine = k.Line
					if w, ok := d.integer(val, prefix+".weight"); ok {
						b.Weight = w
					}
				case "tls_ca_file", "tls_server_name", "tls_client_cert_file", "tls_client_key_file", "tls_insecure_skip_verify":
					if b.tlsKey == "" {
						b.tlsKey, b.tlsLine = key, k.Line
					}
					decodeUpstreamTLS(d, &b.TLS, key, prefix+"."+key, val)
					b.insecureSet = b.insecureSet || key == "tls_insecure_skip_verify"
				case "protocol":
					b.protocolLine = k.Line
					if s, ok := d.str(val, prefix+".protocol"); ok {
						b.Protocol = s
					}
				case "max_requests":
					b.maxRequestsLine = k.Line
					if n, ok := d.integer(val, prefix+".max_requests"); ok {
						if n < 0 {
							d.problem(k.Line, prefix+".max_requests", "must not be negative, got %d", n)
						}
						b.MaxRequests = max(n, 0)
					}
				}
			})
			if raw == nil {
				d.problem(item.Line, prefix, "missing url")
				c.backendProblems++
				continue
			}
		default:
			d.problem(item.Line, prefix, "must be a mapping with url and weight, got %s", describe(item))
			c.backendProblems++
			continue
		}
		s, ok := d.str(raw, prefix+".url")
		if !ok {
			c.backendProblems++
			continue
		}
		if msg := urlShape(s); msg != "" {
			d.problem(raw.Line, prefix+".url", "%s", msg)
			c.backendProblems++
			continue
		}
		u, msg := parseBackendURL(s)
		if msg != "" {
			d.problem(raw.Line, prefix+".url", "%s", msg)
			c.backendProblems++
			continue
		}
		b.URL, b.raw = u, s
		c.Backends = append(c.Backends, b)
	}
}

// parseBackendURL parses one backend address. It only rejects what cannot be
// held as a *url.URL; checkBackendURL judges the rest, so URLs from files,
// flags and code meet the same rules.
func parseBackendURL(raw string) (*url.URL, string) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, "backend URL is empty"
	}
	if !strings.Contains(raw, "://") {
		if u, err := url.Parse("http://" + raw); err == nil && u.Host != "" && u.Path == "" {
			return nil, fmt.Sprintf("%s has no scheme; write %s", quote(raw), quote("http://"+raw))
		}
		return nil, fmt.Sprintf("%s has no scheme and host; write http://HOST:PORT", quote(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		_, rest, _ := strings.Cut(raw, "://")
		authority, _, _ := strings.Cut(rest, "/")
		if strings.Count(authority, ":") > 1 && !strings.Contains(authority, "[") {
			return nil, fmt.Sprintf("%s: an IPv6 address needs brackets, as in http://[::1]:8001", quote(raw))
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Sprintf("%s is not a valid URL: %v", quote(raw), err)
	}
	return u, ""
}

// checkBackendURL lists what is wrong with u as a backend address; raw is
// how it was written, "" when it was built in code.
func checkBackendURL(u *url.URL, raw string) []string {
	if u == nil {
		return []string{"backend has no URL"}
	}
	if raw == "" {
		raw = u.String()
	}
	name := quote(raw)
	var msgs []string
	bad := func(format string, args ...any) {
		msgs = append(msgs, name+": "+fmt.Sprintf(format, args...))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		bad("no scheme; write http://HOST:PORT")
	default:
		bad("scheme %s is not supported; use http or https", quote(u.Scheme))
	}
	if u.Opaque != "" {
		bad("no host; write http://HOST:PORT")
		return msgs
	}
	if u.User != nil {
		bad("credentials in backend URLs are not supported")
	}
	host, port := splitHost(u.Host)
	switch {
	case strings.Count(u.Host, ":") > 1 && !strings.HasPrefix(u.Host, "["):
		// Without brackets nobody can tell where the address ends and the
		// port begins.
		bad("an IPv6 address needs brackets, as in http://[::1]:8001")
		return msgs
	case host == "":
		bad("no host; write http://HOST:PORT")
	case !validHost(host):
		bad("host %s is not a valid host name or IP address", quote(host))
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad("port %s is out of range 1-65535", quote(port))
		}
	}
	if u.Path != "" && u.Path != "/" || u.RawPath != "" {
		bad("a path (%s) is not supported; relay forwards each request's own path, so give only http://HOST:PORT", quote(u.EscapedPath()))
	}
	if u.RawQuery != "" || u.ForceQuery {
		bad("a query (%s) is not supported; give only http://HOST:PORT", quote("?"+u.RawQuery))
	}
	if u.Fragment != "" {
		bad("a fragment (%s) is not supported", quote("#"+u.Fragment))
	}
	return msgs
}

// splitHost splits a URL host into host and port, tolerating a missing port
// and IPv6 brackets.
func splitHost(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

// validHost accepts an IP address or a DNS-style name (letters, digits, '-',
// '.', '_'), which is all a dialer can use. An IPv6 zone must be an
// interface name in the same letters: the address parser takes any bytes
// there, and other bytes do not survive being written back into a URL.
func validHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" || plainName(a.Zone())
	}
	return len(h) <= 253 && plainName(h)
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
		default:
			return false
		}
	}
	return true
}

// canonicalHost is host:port with a lower-case name, the shortest form of an
// IP address and the default port filled in: two URLs naming the same
// server the same way get the same string. Names are not resolved, so
// localhost and 127.0.0.1 stay different.
func canonicalHost(u *url.URL) string {
	host, port := splitHost(u.Host)
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	} else {
		host = strings.ToLower(host)
	}
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n) // drop leading zeros
	}
	return net.JoinHostPort(host, port)
}

// normalize rewrites every backend URL of every pool to its canonical
// form. It runs only after validation, when each URL is known to be a
// plain http:// or https://HOST:PORT.
func (c *Config) normalize() {
	c.Pool.normalize()
	for _, p := range c.Pools {
		p.normalize()
	}
}

func (p *Pool) normalize() {
	for i := range p.Backends {
		b := &p.Backends[i]
		b.URL = &url.URL{Scheme: strings.ToLower(b.URL.Scheme), Host: canonicalHost(b.URL)}
		if b.URL.Scheme == "https" {
			b.TLS = b.TLS.over(p.BackendTLS, b.insecureSet)
		}
	}
}

// BackendURL checks a backend address given at runtime (the admin API) by
// the rules of the file's backends and returns it in canonical form, or
// an error naming every problem.
func BackendURL(raw string) (*url.URL, error) {
	u, msg := parseBackendURL(raw)
	if msg != "" {
		return nil, errors.New(msg)
	}
	if msgs := checkBackendURL(u, raw); len(msgs) > 0 {
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return &url.URL{Scheme: strings.ToLower(u.Scheme), Host: canonicalHost(u)}, nil
}
