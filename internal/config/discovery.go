package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Discovery says where relay finds backends besides the file's. Today
// that is etcd; each source gets its own field.
type Discovery struct {
	// Etcd is nil when relay does not watch etcd.
	Etcd *Etcd
}

// LogAttr says where backends besides the file's come from, for relay's
// start line: discovery="etcd PREFIX", or nothing when none are
// discovered.
func (d Discovery) LogAttr() slog.Attr {
	if d.Etcd == nil {
		return slog.Attr{}
	}
	return slog.String("discovery", "etcd "+d.Etcd.Prefix)
}

// Etcd is where relay discovers backends besides those of the file: each
// key under Prefix in an etcd cluster is one backend (see
// internal/discovery for the value's format).
type Etcd struct {
	// Endpoints are the cluster's client URLs (http://HOST:PORT or
	// https://HOST:PORT); relay uses whichever answers.
	Endpoints []string
	// Prefix is the key prefix watched, for example /relay/backends/.
	Prefix string
	// DialTimeout bounds connecting to the cluster and each list.
	DialTimeout time.Duration
	// Username and Password authenticate to a cluster with auth on.
	Username string
	Password string
	// TLS says how to reach https endpoints: the CA to trust, the name to
	// verify, a client certificate for clusters that require one.
	TLS UpstreamTLS
	// Announce, when not nil, is how relay registers itself in the same
	// cluster, for whatever finds relay instances (another relay, a DNS
	// updater).
	Announce *Announce
}

// Announce is relay registering itself: while relay serves, the key
// Prefix + the URL's host:port holds {"url": URL, "weight": Weight} under
// a lease of TTL that relay keeps alive, the format relay reads backends
// in, so a relay in front can discover the instances behind it.
type Announce struct {
	URL    string // how others reach this relay, http(s)://HOST:PORT
	Prefix string
	TTL    time.Duration
	Weight int
}

// DefaultAnnounceTTL is the lease of relay's own key when none is given;
// MinAnnounceTTL is about etcd's shortest lease.
const (
	DefaultAnnounceTTL = 10 * time.Second
	MinAnnounceTTL     = 2 * time.Second
)

// DefaultEtcdDialTimeout is the etcd dial_timeout when none is given.
const DefaultEtcdDialTimeout = 2 * time.Second

var (
	discoveryKeys = []string{"etcd"}
	etcdKeys      = append([]string{"endpoints", "prefix", "dial_timeout", "username", "password", "announce"}, upstreamTLSKeys...)
	announceKeys  = []string{"url", "prefix", "ttl", "weight"}
)

// decodeDiscovery reads the discovery section. Its settings do not depend
// on any other key, so they are judged here, where each one's line is
// known.
func decodeDiscovery(d *decoder, c *Config, v *yaml.Node) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, "discovery", "must be a mapping (discovery:\n  etcd:\n    endpoints: [...]), got %s", describe(v))
		return
	}
	d.mapping(v, "discovery.", discoveryKeys, func(_ string, k, val *yaml.Node) {
		if val.Kind != yaml.MappingNode {
			d.problem(val.Line, "discovery.etcd", "must be a mapping with endpoints and prefix, got %s", describe(val))
			return
		}
		c.Discovery.Etcd = decodeEtcd(d, k.Line, val)
	})
}

func decodeEtcd(d *decoder, line int, v *yaml.Node) *Etcd {
	const at = "discovery.etcd."
	e := &Etcd{DialTimeout: DefaultEtcdDialTimeout}
	lines := map[string]int{}
	endpointsBad := false // a problem with them is reported already
	d.mapping(v, at, etcdKeys, func(key string, k, val *yaml.Node) {
		lines[key] = k.Line
		switch key {
		case "endpoints":
			items, ok := d.strList(val, at+key)
			if !ok {
				endpointsBad = true
			}
			for i, it := range items {
				if msg := CheckEtcdEndpoint(it.value); msg != "" {
					d.problem(it.line, fmt.Sprintf("%s%s[%d]", at, key, i), "%s", msg)
					endpointsBad = true
				}
				e.Endpoints = append(e.Endpoints, it.value)
			}
		case "prefix", "username", "password":
			if s, ok := d.str(val, at+key); ok {
				*map[string]*string{"prefix": &e.Prefix, "username": &e.Username, "password": &e.Password}[key] = s
			}
		case "dial_timeout":
			if t, ok := d.duration(val, at+key); ok {
				e.DialTimeout = t
				if t <= 0 {
					d.problem(k.Line, at+key, "must be longer than zero, got %v", t)
				}
			}
		case "announce":
			e.Announce, lines["announce.prefix"] = decodeAnnounce(d, k.Line, val)
		default:
			decodeUpstreamTLS(d, &e.TLS, key, at+key, val)
		}
	})
	switch {
	case endpointsBad:
	case lines["endpoints"] == 0:
		d.problem(line, at+"endpoints", "missing: list the cluster's client URLs, for example [http://127.0.0.1:2379]")
	case len(e.Endpoints) == 0:
		d.problem(lines["endpoints"], at+"endpoints", "is empty: list the cluster's client URLs, for example [http://127.0.0.1:2379]")
	case e.mixed():
		d.problem(lines["endpoints"], at+"endpoints", "mixes http:// and https://; the etcd client speaks one of them to every endpoint")
	}
	if e.Prefix == "" && lines["prefix"] == 0 {
		d.problem(line, at+"prefix", "missing: the key prefix whose keys are backends, for example /relay/backends/")
	} else if e.Prefix == "" {
		d.problem(lines["prefix"], at+"prefix", "must not be empty: relay would take every key in etcd for a backend")
	}
	if (e.Username == "") != (e.Password == "") {
		key := "username"
		if e.Username == "" {
			key = "password"
		}
		other := map[string]string{"username": "password", "password": "username"}[key]
		d.problem(lines[key], at+key, "%s is set without %s", key, other)
	}
	if a := e.Announce; a != nil && a.Prefix != "" && e.Prefix != "" && overlaps(a.Prefix, e.Prefix) {
		d.problem(lines["announce.prefix"], at+"announce.prefix", "%s overlaps prefix %s: relay would discover itself as a backend and send requests to itself; list instances under another prefix, for example /relay/instances/",
			quote(a.Prefix), quote(e.Prefix))
	}
	if e.TLS.Set() {
		for _, tp := range e.TLS.Problems() {
			d.problem(lines[tp.Key], at+tp.Key, "%s", tp.Msg)
		}
		if !e.UsesTLS() {
			d.problem(line, at+"endpoints", "TLS settings are given but no endpoint is https://; write the endpoints as https://HOST:PORT")
		}
	}
	return e
}

// decodeAnnounce reads the announce section, and says on which line its
// prefix is.
func decodeAnnounce(d *decoder, line int, v *yaml.Node) (*Announce, int) {
	const at = "discovery.etcd.announce."
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, "discovery.etcd.announce", "must be a mapping with url and prefix, got %s", describe(v))
		return nil, 0
	}
	a := &Announce{TTL: DefaultAnnounceTTL, Weight: DefaultWeight}
	lines := map[string]int{}
	d.mapping(v, at, announceKeys, func(key string, k, val *yaml.Node) {
		lines[key] = k.Line
		switch key {
		case "url":
			if s, ok := d.str(val, at+key); ok {
				if u, err := BackendURL(s); err != nil {
					d.problem(val.Line, at+key, "%v", err)
				} else {
					a.URL = u.String()
				}
			}
		case "prefix":
			if s, ok := d.str(val, at+key); ok {
				a.Prefix = s
				if s == "" {
					d.problem(val.Line, at+key, "must not be empty")
				}
			}
		case "ttl":
			if t, ok := d.duration(val, at+key); ok {
				a.TTL = t
				if t < MinAnnounceTTL {
					d.problem(val.Line, at+key, "%v is too short: etcd's shortest lease is about %v", t, MinAnnounceTTL)
				}
			}
		case "weight":
			if n, ok := d.integer(val, at+key); ok {
				a.Weight = n
				if n < 1 || n > MaxWeight {
					d.problem(val.Line, at+key, "%d is outside 1..%d", n, MaxWeight)
				}
			}
		}
	})
	for _, key := range []string{"url", "prefix"} {
		if lines[key] == 0 {
			d.problem(line, at+key, "missing: announce needs url (how others reach this relay) and prefix (where instances are listed, for example /relay/instances/)")
		}
	}
	return a, lines["prefix"]
}

// overlaps reports whether one prefix holds the other's keys.
func overlaps(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }

// mixed reports whether some endpoints are http and others https.
func (e *Etcd) mixed() bool {
	n := 0
	for _, ep := range e.Endpoints {
		if strings.HasPrefix(strings.ToLower(ep), "https://") {
			n++
		}
	}
	return n > 0 && n < len(e.Endpoints)
}

// UsesTLS reports whether relay speaks TLS to the cluster: its endpoints
// are https URLs.
func (e *Etcd) UsesTLS() bool {
	for _, ep := range e.Endpoints {
		if strings.HasPrefix(strings.ToLower(ep), "https://") {
			return true
		}
	}
	return false
}

// CheckEtcdEndpoint says what is wrong with one etcd endpoint, or "": it
// must be http:// or https://HOST:PORT and nothing more. The file's
// endpoints and cmd/server's -register meet the same rule.
func CheckEtcdEndpoint(ep string) string {
	if !strings.Contains(ep, "://") {
		return fmt.Sprintf("%s has no scheme; write http://%s (or https://)", quote(ep), ep)
	}
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Sprintf("%s is not a URL: %v", quote(ep), err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%s: the scheme must be http or https, got %s", quote(ep), quote(u.Scheme))
	case u.Port() == "" || u.Hostname() == "":
		return fmt.Sprintf("%s needs a host and a port, as in http://127.0.0.1:2379", quote(ep))
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil:
		return fmt.Sprintf("%s must be just scheme://HOST:PORT", quote(ep))
	}
	return ""
}
