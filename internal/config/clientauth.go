package config

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/route"
)

// Client certificate modes (client_auth[].mode), as crypto/tls's
// ClientAuthType: none asks for no certificate; request asks, never
// refuses a handshake for what it gets, and counts a certificate as
// verified only when ca_files are given and it passes every check
// (chain, expiry, CRL, allow); require refuses a handshake without a
// verified certificate; verify_if_given refuses one with a certificate
// that does not verify and takes one without.
const (
	ClientAuthNone          = "none"
	ClientAuthRequest       = "request"
	ClientAuthRequire       = "require"
	ClientAuthVerifyIfGiven = "verify_if_given"
)

// ClientAuthModes are the modes client_auth[].mode takes.
var ClientAuthModes = []string{ClientAuthNone, ClientAuthRequest, ClientAuthRequire, ClientAuthVerifyIfGiven}

// What relay tells backends of a verified client certificate
// (client_cert_headers).
const (
	ClientCertNone   = "none"
	ClientCertXFCC   = "xfcc"
	ClientCertFields = "fields"
)

// ClientCertHeaderModes are the values client_cert_headers takes.
var ClientCertHeaderModes = []string{ClientCertNone, ClientCertXFCC, ClientCertFields}

// ClientAuthRule is one entry of client_auth: the TLS listener's client
// certificate settings for the names in Hosts (SNI), or, without Hosts,
// for every name no other rule covers.
type ClientAuthRule struct {
	// Hosts are the names the rule covers, lower case: exact names and
	// "*.domain" wildcards of one label. Empty: the listener's default.
	Hosts []string
	// Mode is one of ClientAuthModes; "" is none.
	Mode string
	// CAFiles are PEM files of the certificate authorities that sign
	// client certificates; CRLFiles their revocation lists, PEM or DER.
	CAFiles  []string
	CRLFiles []string
	// Allow, when it lists anything, is what a verified certificate must
	// match besides its chain.
	Allow ClientAllow
	// Line is the YAML line of the entry.
	Line int

	lines map[string]int // the line of each key, "ca_files[0]" for list items
}

// ClientAllow lists what a verified client certificate may be: it must
// match one entry of any kind listed.
type ClientAllow struct {
	// Subjects are subjects as RFC 2253 writes them ("CN=payments,O=Example"),
	// compared with the certificate's whole subject.
	Subjects []string
	// DNS are DNS names, one of which the certificate's DNS SANs must hold
	// (case aside).
	DNS []string
	// URI are URI SANs; one ending in * matches every URI that begins
	// with what comes before it.
	URI []string
}

// Empty reports whether a lists nothing, so that any verified
// certificate passes.
func (a ClientAllow) Empty() bool { return len(a.Subjects)+len(a.DNS)+len(a.URI) == 0 }

// Verifies reports whether the rule checks the certificates it gets.
func (r *ClientAuthRule) Verifies() bool {
	switch r.Mode {
	case ClientAuthRequire, ClientAuthVerifyIfGiven:
		return true
	case ClientAuthRequest:
		return len(r.CAFiles) > 0
	}
	return false
}

func (r *ClientAuthRule) line(key string) int {
	if l := r.lines[key]; l > 0 {
		return l
	}
	return r.Line
}

var (
	clientAuthKeys  = []string{"hosts", "mode", "ca_files", "crl_files", "allow"}
	clientAllowKeys = []string{"subjects", "dns", "uri"}
)

// decodeClientAuth reads client_auth: a list of rules.
func decodeClientAuth(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, "client_auth", "must be a list of rules (- hosts: [NAME]\n    mode: require\n    ca_files: [FILE]), got %s", describe(v))
		return
	}
	for i, item := range v.Content {
		item = resolve(item)
		at := fmt.Sprintf("client_auth[%d]", i)
		if item.Kind != yaml.MappingNode {
			d.problem(item.Line, at, "must be a mapping with hosts, mode and ca_files, got %s", describe(item))
			continue
		}
		r := ClientAuthRule{Line: item.Line, lines: map[string]int{}}
		d.mapping(item, at+".", clientAuthKeys, func(key string, k, val *yaml.Node) {
			r.lines[key] = k.Line
			if isNull(val) {
				return
			}
			path := at + "." + key
			switch key {
			case "hosts":
				items, ok := d.oneOrList(val, path)
				if !ok {
					return
				}
				if len(items) == 0 {
					d.problem(val.Line, path, "is empty; leave hosts out to make the rule the listener's default")
				}
				for j, it := range items {
					p := fmt.Sprintf("%s[%d]", path, j)
					r.lines[fmt.Sprintf("hosts[%d]", j)] = it.line
					h, msg := clientAuthHost(it.value)
					if msg != "" {
						d.problem(it.line, p, "%s", msg)
						continue
					}
					r.Hosts = append(r.Hosts, h)
				}
			case "mode":
				if s, ok := d.str(val, path); ok {
					r.Mode = s
				}
			case "ca_files", "crl_files":
				items, ok := d.oneOrList(val, path)
				if !ok {
					return
				}
				for j, it := range items {
					r.lines[fmt.Sprintf("%s[%d]", key, j)] = it.line
					if key == "ca_files" {
						r.CAFiles = append(r.CAFiles, it.value)
					} else {
						r.CRLFiles = append(r.CRLFiles, it.value)
					}
				}
			case "allow":
				d.clientAllow(val, path, &r)
			}
		})
		c.ClientAuth = append(c.ClientAuth, r)
	}
}

// clientAuthHost judges one name of a rule's hosts and returns it in the
// form SNI names are compared in, or says what is wrong with it.
func clientAuthHost(s string) (string, string) {
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return "", fmt.Sprintf("%s is an IP address; clients send no IP address by SNI, so a rule can only name hosts", quote(s))
	}
	if strings.HasSuffix(s, ".") {
		return "", fmt.Sprintf("%s ends with a dot; write it without the dot", quote(s))
	}
	h, err := route.HostPattern(s)
	if err != nil {
		return "", err.Error()
	}
	if strings.HasPrefix(h, "*.") && !strings.Contains(h[2:], ".") {
		return "", fmt.Sprintf("%s: a wildcard needs a domain of at least two labels after \"*.\", such as *.example.com", quote(s))
	}
	return h, ""
}

// clientAllow decodes a rule's allow section.
func (d *decoder) clientAllow(v *yaml.Node, at string, r *ClientAuthRule) {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, at, "must be a mapping with subjects, dns and uri, got %s", describe(v))
		return
	}
	d.mapping(v, at+".", clientAllowKeys, func(key string, k, val *yaml.Node) {
		r.lines["allow."+key] = k.Line
		if isNull(val) {
			return
		}
		path := at + "." + key
		items, ok := d.oneOrList(val, path)
		if !ok {
			return
		}
		if len(items) == 0 {
			d.problem(val.Line, path, "is empty; leave it out to allow any %s", map[string]string{"subjects": "subject", "dns": "DNS name", "uri": "URI"}[key])
		}
		for j, it := range items {
			p := fmt.Sprintf("%s[%d]", path, j)
			switch key {
			case "subjects":
				if !strings.Contains(it.value, "=") {
					d.problem(it.line, p, "%s is not a subject; write it as RFC 2253 does, such as \"CN=payments,O=Example\"", quote(it.value))
					continue
				}
				r.Allow.Subjects = append(r.Allow.Subjects, it.value)
			case "dns":
				if _, msg := clientAuthHost(it.value); msg != "" || strings.HasPrefix(it.value, "*.") {
					d.problem(it.line, p, "%s is not a DNS name such as svc.example.com", quote(it.value))
					continue
				}
				r.Allow.DNS = append(r.Allow.DNS, strings.ToLower(it.value))
			case "uri":
				body, _ := strings.CutSuffix(it.value, "*")
				if strings.Contains(body, "*") {
					d.problem(it.line, p, "%s: only a trailing * is a wildcard (it matches every URI that begins with what comes before it)", quote(it.value))
					continue
				}
				if u, err := url.Parse(body); err != nil || u.Scheme == "" {
					d.problem(it.line, p, "%s is not a URI with a scheme, such as spiffe://example.org/ns/prod/sa/payments", quote(it.value))
					continue
				}
				r.Allow.URI = append(r.Allow.URI, it.value)
			}
		}
	})
}

// checkClientAuth reports what is wrong with client_auth: modes, the
// files each rule reads (each is read, so relay -check finds a missing
// file, one with no certificate and a CRL no CA of the rule signed), a
// second default rule and a host in two rules.
func (c *Config) checkClientAuth(errs *Errors) {
	add := func(line int, key, format string, args ...any) {
		errs.add(Problem{File: c.Path, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if len(c.ClientAuth) > 0 && c.TLSListen == "" {
		add(c.lines["client_auth"], "client_auth", "asks TLS clients for certificates, but tls_listen is not set; set tls_listen (for example \":8443\") to serve TLS")
	}
	def := -1
	hosts := map[string]int{} // host -> rule
	for i := range c.ClientAuth {
		r := &c.ClientAuth[i]
		at := fmt.Sprintf("client_auth[%d]", i)
		if len(r.Hosts) == 0 && r.lines["hosts"] == 0 {
			if def >= 0 {
				add(r.Line, at, "has no hosts, which makes it the listener's default, and client_auth[%d] (line %d) is the default already; give this rule hosts", def, c.ClientAuth[def].Line)
			} else {
				def = i
			}
		}
		for j, h := range r.Hosts {
			if k, dup := hosts[h]; dup {
				p := fmt.Sprintf("%s.hosts[%d]", at, j)
				if k == i {
					add(r.line(fmt.Sprintf("hosts[%d]", j)), p, "%s is listed twice", quote(h))
				} else {
					add(r.line(fmt.Sprintf("hosts[%d]", j)), p, "%s is in client_auth[%d] (line %d) too; a name gets one rule", quote(h), k, c.ClientAuth[k].Line)
				}
				continue
			}
			hosts[h] = i
		}
		mode := r.Mode
		if mode == "" {
			mode = ClientAuthNone
		}
		known := false
		for _, m := range ClientAuthModes {
			known = known || m == mode
		}
		if !known {
			add(r.line("mode"), at+".mode", "must be one of %s; got %s%s", strings.Join(ClientAuthModes, ", "), quote(r.Mode), didYouMean(r.Mode, ClientAuthModes))
		}
		switch {
		case !known:
		case mode == ClientAuthNone && len(r.CAFiles) > 0:
			add(r.line("ca_files"), at+".ca_files", "are given, but mode is none, which asks for no certificate; set mode (request, require or verify_if_given) or remove ca_files")
		case (mode == ClientAuthRequire || mode == ClientAuthVerifyIfGiven) && len(r.CAFiles) == 0:
			add(r.line("mode"), at+".ca_files", "mode %s verifies client certificates, which needs ca_files: the PEM files of the authorities that sign them", mode)
		}
		if known && !r.Allow.Empty() && !r.Verifies() {
			add(r.line("allow"), at+".allow", "a rule that verifies no certificate (mode %s%s) has nothing to allow; give ca_files and mode require, verify_if_given or request", mode,
				map[bool]string{true: " without ca_files"}[mode == ClientAuthRequest])
		}
		var cas []*x509.Certificate
		for j, f := range r.CAFiles {
			key := fmt.Sprintf("ca_files[%d]", j)
			certs, err := LoadCACerts(f)
			if err != nil {
				add(r.line(key), at+"."+key, "%v", err)
				continue
			}
			cas = append(cas, certs...)
		}
		if len(r.CRLFiles) > 0 && len(r.CAFiles) == 0 {
			add(r.line("crl_files"), at+".crl_files", "revocation lists need the ca_files whose certificates they revoke")
			continue
		}
		for j, f := range r.CRLFiles {
			key := fmt.Sprintf("crl_files[%d]", j)
			if _, err := LoadCRLFile(f, cas); err != nil && (len(cas) > 0 || !errors.Is(err, errNoIssuer)) {
				add(r.line(key), at+"."+key, "%v", err)
			}
		}
	}
	if c.ClientCertHeaders != "" && !clientCertMode(c.ClientCertHeaders) {
		add(c.lines["client_cert_headers"], "client_cert_headers", "must be one of %s; got %s%s",
			strings.Join(ClientCertHeaderModes, ", "), quote(c.ClientCertHeaders), didYouMean(c.ClientCertHeaders, ClientCertHeaderModes))
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.ClientCertHeaders != "" && !clientCertMode(r.ClientCertHeaders) {
			add(r.line("client_cert_headers"), fmt.Sprintf("routes[%d].client_cert_headers", i), "must be one of %s; got %s%s",
				strings.Join(ClientCertHeaderModes, ", "), quote(r.ClientCertHeaders), didYouMean(r.ClientCertHeaders, ClientCertHeaderModes))
		}
	}
}

func clientCertMode(s string) bool {
	for _, m := range ClientCertHeaderModes {
		if m == s {
			return true
		}
	}
	return false
}

// LoadCACerts reads the certificates of a PEM file of certificate
// authorities, with an error that names the file and says what is wrong.
func LoadCACerts(file string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", quote(file), unwrapPath(err))
	}
	var certs []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: a certificate does not parse: %v", quote(file), err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", quote(file))
	}
	return certs, nil
}

var errNoIssuer = errors.New("no CA")

// LoadCRLFile reads a certificate revocation list, PEM or DER, and checks
// that one of cas signed it; it returns the list and the CA.
func LoadCRLFile(file string, cas []*x509.Certificate) (*x509.RevocationList, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", quote(file), unwrapPath(err))
	}
	der := data
	if b, _ := pem.Decode(data); b != nil {
		if b.Type != "X509 CRL" {
			return nil, fmt.Errorf("%s holds a PEM %s, not an X509 CRL", quote(file), b.Type)
		}
		der = b.Bytes
	} else if bytes.HasPrefix(bytes.TrimSpace(data), []byte("-----")) {
		return nil, fmt.Errorf("%s is not a PEM or DER revocation list", quote(file))
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, fmt.Errorf("%s is not a PEM or DER revocation list: %v", quote(file), err)
	}
	if len(cas) == 0 {
		return nil, errNoIssuer
	}
	for _, ca := range cas {
		if bytes.Equal(crl.RawIssuer, ca.RawSubject) && crl.CheckSignatureFrom(ca) == nil {
			return crl, nil
		}
	}
	return nil, fmt.Errorf("%s is not signed by any certificate of the rule's ca_files", quote(file))
}

// ClientAuthHosts finds the client_auth rule of a host name: exact names
// first, then a wildcard of one label, then the default rule.
type ClientAuthHosts struct {
	exact, wild map[string]int
	def         int
	// Differ says that names may fall under different rules: some rule
	// names hosts. Without it, every connection and request has the same
	// rule.
	Differ bool
}

// NewClientAuthHosts returns the finder of rules's hosts.
func NewClientAuthHosts(rules []ClientAuthRule) *ClientAuthHosts {
	h := &ClientAuthHosts{exact: map[string]int{}, wild: map[string]int{}, def: -1}
	for i, r := range rules {
		if len(r.Hosts) == 0 {
			if h.def < 0 {
				h.def = i
			}
			continue
		}
		h.Differ = true
		for _, n := range r.Hosts {
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				if _, dup := h.wild[rest]; !dup {
					h.wild[rest] = i
				}
			} else if _, dup := h.exact[n]; !dup {
				h.exact[n] = i
			}
		}
	}
	return h
}

// maxHostName bounds the names Rule compares; a longer one is no DNS name
// and falls under the default rule.
const maxHostName = 255

// Rule returns the index of the rule covering host (a name as SNI sends
// it, or a Host field's value: a port and one trailing dot are ignored,
// case is not significant), or -1 when no rule covers it. It allocates
// nothing.
func (h *ClientAuthHosts) Rule(host []byte) int {
	if len(host) > 0 && host[0] == '[' {
		return h.def // an IPv6 address: SNI never names one
	}
	if i := bytes.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = bytes.TrimSuffix(host, []byte("."))
	if len(host) == 0 || len(host) > maxHostName {
		return h.def
	}
	var buf [maxHostName]byte
	n := copy(buf[:], host)
	for i, c := range buf[:n] {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	name := buf[:n]
	if i, ok := h.exact[string(name)]; ok {
		return i
	}
	if dot := bytes.IndexByte(name, '.'); dot > 0 {
		if i, ok := h.wild[string(name[dot+1:])]; ok {
			return i
		}
	}
	return h.def
}

// RuleOf is Rule for a string.
func (h *ClientAuthHosts) RuleOf(name string) int {
	var buf [maxHostName]byte
	if len(name) > maxHostName {
		return h.def
	}
	return h.Rule(buf[:copy(buf[:], name)])
}

// ClientCertHeaders is what relay tells the backend of a route (nil: the
// requests no route takes) about a client's verified certificate: one of
// ClientCertHeaderModes, and with fields whether X-Client-Cert carries
// the certificate itself. A route's own keys come first, then the top
// level's; without either, xfcc when some client_auth rule verifies
// certificates, else none.
func (c *Config) ClientCertHeadersOf(r *Route) (mode string, pem bool) {
	mode, pem = c.ClientCertHeaders, c.ClientCertPEM
	if r != nil && r.ClientCertHeaders != "" {
		mode = r.ClientCertHeaders
	}
	if r != nil && r.ClientCertPEM != nil {
		pem = *r.ClientCertPEM
	}
	if mode == "" {
		mode = ClientCertNone
		for i := range c.ClientAuth {
			if m := c.ClientAuth[i].Mode; m != "" && m != ClientAuthNone {
				mode = ClientCertXFCC
			}
		}
	}
	return mode, pem
}

// clientAuthWarnings warns of a cleartext listener beside rules that
// require certificates: requests on listen carry no certificate and no
// SNI, so every host, those rules' included, is served there without one.
func (c *Config) clientAuthWarnings() []Problem {
	if c.Listen == "" {
		return nil
	}
	for i := range c.ClientAuth {
		r := &c.ClientAuth[i]
		if r.Mode == ClientAuthRequire || r.Mode == ClientAuthVerifyIfGiven {
			return []Problem{{File: c.Path, Line: r.line("mode"), Key: fmt.Sprintf("client_auth[%d].mode", i),
				Msg: fmt.Sprintf("%s holds TLS clients to certificates, but listen (%s) serves every host in cleartext, where no client gives one; set listen: \"\" or keep those hosts off it (a route's match.scheme: https)", r.Mode, c.Listen)}}
		}
	}
	return nil
}
