package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ACME is relay ordering and renewing its own certificates from an ACME
// CA, for names that no tls_certificates entry covers.
type ACME struct {
	// Email is the account's contact, where the CA writes about expiry
	// and policy; "" registers without one.
	Email string
	// CA is the directory URL; DefaultACMECA when unset.
	CA string
	// CARoot is a PEM file of roots to trust for the CA's own HTTPS (a
	// private CA); "" trusts the system's.
	CARoot string
	// Domains are the names to hold certificates for; a reload applies
	// them (the section's other keys wait for a restart).
	Domains []string `reload:"live"`
	// KeyType is the certificates' key type (acme.KeyTypes).
	KeyType string
	// Challenges are the challenge types the CA may use: "tls-alpn-01"
	// (on tls_listen, which the CA reaches on port 443) and "http-01"
	// (on listen, which the CA reaches on port 80). Unset, both when
	// listen is on port 80, else tls-alpn-01 alone (checkACME).
	Challenges []string
	// Storage is where certificates, keys, the account and challenges
	// in flight are kept.
	Storage ACMEStorage
	// CheckInterval is how often certificates are looked at for renewal.
	CheckInterval time.Duration
	// OnDemand, when set, orders certificates at the first handshake
	// for names of its rule (acmeondemand.go).
	OnDemand *ACMEOnDemand
	// Line is the section's line in the file.
	Line int
}

// ACMEStorage says where ACME keeps what it has.
type ACMEStorage struct {
	// Type is "file", "etcd" (the discovery.etcd cluster) or "redis"
	// (the redis section's server).
	Type string
	// Dir is the file storage's directory.
	Dir string
	// Prefix starts every key in etcd or Redis.
	Prefix string
}

// Defaults of the acme section.
const (
	DefaultACMECA            = "https://acme-v02.api.letsencrypt.org/directory"
	DefaultACMEDir           = "acme"
	DefaultACMEEtcdPrefix    = "/relay/certs/"
	DefaultACMERedisPrefix   = "relay:certs:"
	DefaultACMECheckInterval = 10 * time.Minute
)

var (
	acmeKeys        = []string{"email", "ca", "ca_root", "domains", "key_type", "challenges", "storage", "check_interval", "on_demand"}
	acmeStorageKeys = []string{"type", "dir", "prefix"}
	acmeChallenges  = []string{"http-01", "tls-alpn-01"}
	acmeKeyTypes    = []string{"ecdsa-p256", "ecdsa-p384", "rsa2048", "rsa4096", "ed25519"}
	acmeStorages    = []string{"file", "etcd", "redis"}
)

// decodeACME reads the acme section.
func decodeACME(d *decoder, c *Config, v *yaml.Node) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, "acme", "must be a mapping such as {email: ops@example.com, domains: [example.com]}, got %s", describe(v))
		return
	}
	a := &ACME{CA: DefaultACMECA, KeyType: "ecdsa-p256", CheckInterval: DefaultACMECheckInterval, Line: v.Line,
		Storage: ACMEStorage{Type: "file"}}
	challengesSet := false
	d.mapping(v, "acme.", acmeKeys, func(key string, k, val *yaml.Node) {
		path := "acme." + key
		switch key {
		case "email", "ca", "ca_root", "key_type":
			s, ok := d.str(val, path)
			if !ok {
				return
			}
			*map[string]*string{"email": &a.Email, "ca": &a.CA, "ca_root": &a.CARoot, "key_type": &a.KeyType}[key] = s
			switch key {
			case "email":
				if s != "" && !strings.Contains(s, "@") {
					d.problem(val.Line, path, "%s is not an email address", quote(s))
				}
			case "ca":
				if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" {
					d.problem(val.Line, path, "must be the CA's directory URL, https://HOST/PATH, got %s", quote(s))
				}
			case "ca_root":
				if msg := checkRoots(s); msg != "" {
					d.problem(val.Line, path, "%s", msg)
				}
			case "key_type":
				d.oneOf(val.Line, path, s, acmeKeyTypes...)
			}
		case "domains":
			items, ok := d.strList(val, path)
			if !ok {
				return
			}
			for i, it := range items {
				name := strings.ToLower(strings.TrimSuffix(it.value, "."))
				if msg := checkDomain(name); msg != "" {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s", msg)
					continue
				}
				if slices.Contains(a.Domains, name) {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s is listed twice", quote(name))
					continue
				}
				a.Domains = append(a.Domains, name)
			}
		case "challenges":
			items, ok := d.strList(val, path)
			if !ok {
				return
			}
			challengesSet = true
			a.Challenges = []string{}
			for i, it := range items {
				if !slices.Contains(acmeChallenges, it.value) {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "must be http-01 or tls-alpn-01, got %s%s", quote(it.value), didYouMean(it.value, acmeChallenges))
					continue
				}
				if !slices.Contains(a.Challenges, it.value) {
					a.Challenges = append(a.Challenges, it.value)
				}
			}
		case "storage":
			d.acmeStorage(val, a)
		case "on_demand":
			d.acmeOnDemand(val, a)
		case "check_interval":
			if t, ok := d.duration(val, path); ok {
				a.CheckInterval = t
				if t < time.Second || t > 24*time.Hour {
					d.problem(val.Line, path, "must be at least 1s and at most 24h, got %v", t)
				}
			}
		}
	})
	if !challengesSet {
		a.Challenges = nil // chosen by the listeners, in checkACME
	}
	switch a.Storage.Type {
	case "file":
		if a.Storage.Dir == "" {
			a.Storage.Dir = DefaultACMEDir
		}
	case "etcd":
		if a.Storage.Prefix == "" {
			a.Storage.Prefix = DefaultACMEEtcdPrefix
		}
	case "redis":
		if a.Storage.Prefix == "" {
			a.Storage.Prefix = DefaultACMERedisPrefix
		}
	}
	c.ACME = a
}

func (d *decoder) acmeStorage(v *yaml.Node, a *ACME) {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, "acme.storage", "must be a mapping such as {type: etcd}, got %s", describe(v))
		return
	}
	d.mapping(v, "acme.storage.", acmeStorageKeys, func(key string, k, val *yaml.Node) {
		path := "acme.storage." + key
		s, ok := d.str(val, path)
		if !ok {
			return
		}
		switch key {
		case "type":
			a.Storage.Type = s
			d.oneOf(val.Line, path, s, acmeStorages...)
		case "dir":
			a.Storage.Dir = s
			if s == "" {
				d.problem(val.Line, path, "must not be empty")
			}
		case "prefix":
			a.Storage.Prefix = s
			if s == "" {
				d.problem(val.Line, path, "must not be empty: the certificates' keys would mix with every other key")
			}
		}
	})
}

// checkDomain says what is wrong with a name to order a certificate
// for, or "".
func checkDomain(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case strings.Contains(name, "*"):
		return fmt.Sprintf("%s is a wildcard, which only the dns-01 challenge can prove; relay answers http-01 and tls-alpn-01", quote(name))
	case net.ParseIP(name) != nil:
		return fmt.Sprintf("%s is an address: clients do not ask for an address by SNI, so relay orders certificates for names only", quote(name))
	case len(name) > 253 || strings.ContainsAny(name, " /:@_") || strings.HasPrefix(name, ".") || strings.Contains(name, ".."):
		return fmt.Sprintf("%s is not a host name", quote(name))
	case !strings.Contains(name, "."):
		return fmt.Sprintf("%s has no dot: a CA orders certificates for names in a public domain", quote(name))
	}
	return ""
}

// checkRoots says what is wrong with a PEM file of roots, or "".
func checkRoots(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("%s: %s", quote(file), unwrapPath(err).Error())
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Sprintf("%s holds no PEM certificate", quote(file))
	}
	return ""
}

// defaultChallenges are the challenges of an acme section that names
// none: tls-alpn-01, and http-01 too when the cleartext listener is on
// port 80, where the CA asks, so that a CA that cannot reach port 443
// still validates. On another port http-01 would reach relay only
// through a port map relay cannot see, and a challenge the CA cannot
// complete is a failed validation counted against the account; the file
// asks for it then.
func defaultChallenges(listen string) []string {
	if _, port, err := net.SplitHostPort(listen); err == nil && port == "80" {
		return []string{"tls-alpn-01", "http-01"}
	}
	return []string{"tls-alpn-01"}
}

// checkACME judges the acme section against the rest of the file: the
// listeners its challenges need and the sections its storage uses. It
// settles which challenges are on when the file does not say.
func (c *Config) checkACME(bad func(key, format string, args ...any)) {
	a := c.ACME
	if a == nil {
		return
	}
	if c.TLSListen == "" {
		bad("acme", "ordering certificates needs a TLS listener to serve them: set tls_listen (for example \":443\")")
	} else if portZero(c.TLSListen) {
		bad("acme", "tls_listen %s lets the system choose a port, which the CA cannot be told: give it the port the CA reaches (443, or one it is forwarded to)", quote(c.TLSListen))
	}
	if len(a.Domains) == 0 && a.OnDemand == nil {
		bad("acme.domains", "missing: the names to order certificates for, for example [example.com, www.example.com], or on_demand to order them at their first handshake")
	}
	c.checkACMEOnDemand(bad)
	if a.Challenges == nil {
		a.Challenges = defaultChallenges(c.Listen)
	}
	if slices.Contains(a.Challenges, "http-01") {
		switch {
		case c.Listen == "":
			bad("acme.challenges", "http-01 is answered on the cleartext listener, and listen is off: set listen (the CA asks on port 80), or use tls-alpn-01 alone")
		case portZero(c.Listen):
			bad("acme.challenges", "http-01 is answered on listen, and listen %s lets the system choose a port, which the CA cannot be told: give it port 80 (or one port 80 is forwarded to)", quote(c.Listen))
		}
	}
	if len(a.Challenges) == 0 {
		bad("acme.challenges", "must name tls-alpn-01, http-01 or both")
	}
	switch a.Storage.Type {
	case "etcd":
		if c.Discovery.Etcd == nil {
			bad("acme.storage.type", "is etcd but the file has no discovery.etcd section saying where etcd is")
		}
	case "redis":
		if c.Redis == nil {
			bad("acme.storage.type", "is redis but the file has no redis section saying where Redis is")
		}
	}
}
