package core

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"

	"relay/internal/h1"
)

// Client certificates on the request path. What a TLS connection's
// handshake established is worked out once per connection (ClientTLSOf)
// and shared by its requests through Peer.Client, on both doors. Three
// features use it:
//
//   - ClientCertGuard, one of the core's own: every request, from any
//     client over any listener, loses the fields relay writes about
//     client certificates (X-Forwarded-Client-Cert, X-Client-Cert and
//     X-Client-Cert-*), in its head and in its trailers, so that only
//     relay's word reaches a backend;
//   - ClientCertHeaders, a route's or a pool's: relay's fields about a
//     verified certificate, as Envoy's X-Forwarded-Client-Cert or as
//     X-Client-Cert-* fields;
//   - the core's misdirection check (Misdirected): a request whose host
//     falls under another client certificate rule than the connection's
//     SNI name is answered 421.

// ClientTLS is what requests need of a TLS client connection's handshake.
// It is made once per connection and read by its requests, never changed.
type ClientTLS struct {
	// ServerName is the name the client asked for by SNI, "" for none.
	ServerName string
	name       []byte // ServerName, for HostRules
	// Cert is the client's verified certificate; nil when it sent none or
	// relay did not verify it (mode request without ca_files, or a
	// certificate that failed request's checks).
	Cert *x509.Certificate

	// What the request path writes, made with the connection: the
	// subject for the access log, and the upstream field lines.
	subject []byte
	xfcc    []byte // X-Forwarded-Client-Cert
	fields  []byte // X-Client-Cert-Subject and the rest
	pem     []byte // X-Client-Cert
}

// Subject is the verified certificate's subject as RFC 2253 writes it,
// nil without one.
func (ct *ClientTLS) Subject() []byte {
	if ct == nil {
		return nil
	}
	return ct.subject
}

// SetClientVerifier gives the core the function that says which chains
// of a TLS client's certificate are verified (tlsconf.Server.Verified),
// before the doors serve. Without one, the chains crypto/tls verified
// count.
func (c *Core) SetClientVerifier(v func(*tls.ConnectionState) [][]*x509.Certificate) {
	c.verifier.Store(&v)
}

// ClientTLSOf works out what requests need of a TLS client connection
// whose handshake is done; a door calls it once per connection and puts
// the result in its Peer's Client.
func (c *Core) ClientTLSOf(cs *tls.ConnectionState) *ClientTLS {
	ct := &ClientTLS{ServerName: cs.ServerName, name: []byte(cs.ServerName)}
	chains := cs.VerifiedChains
	if v := c.verifier.Load(); v != nil && *v != nil {
		chains = (*v)(cs)
	}
	if len(chains) > 0 && len(chains[0]) > 0 {
		ct.setCert(chains[0][0])
	}
	return ct
}

// setCert makes the field lines for cert.
func (ct *ClientTLS) setCert(cert *x509.Certificate) {
	ct.Cert = cert
	sum := sha256.Sum256(cert.Raw)
	hash := hex.EncodeToString(sum[:])
	subject := cert.Subject.String()
	ct.subject = appendSafe(nil, subject)

	// Envoy's form: Hash, then Subject always quoted, then a URI= and a
	// DNS= per SAN, quoted when they hold , ; = or ".
	x := append([]byte("X-Forwarded-Client-Cert: Hash="), hash...)
	x = append(x, ";Subject="...)
	x = appendXFCCQuoted(x, subject)
	for _, u := range cert.URIs {
		x = append(x, ";URI="...)
		x = appendXFCCValue(x, u.String())
	}
	for _, d := range cert.DNSNames {
		x = append(x, ";DNS="...)
		x = appendXFCCValue(x, d)
	}
	ct.xfcc = append(x, "\r\n"...)

	f := appendLine(nil, "X-Client-Cert-Subject", subject)
	f = appendLine(f, "X-Client-Cert-Issuer", cert.Issuer.String())
	f = appendLine(f, "X-Client-Cert-Serial", hex.EncodeToString(cert.SerialNumber.Bytes()))
	f = appendLine(f, "X-Client-Cert-Fingerprint", hash)
	for _, d := range cert.DNSNames {
		f = appendLine(f, "X-Client-Cert-DNS", d)
	}
	for _, u := range cert.URIs {
		f = appendLine(f, "X-Client-Cert-URI", u.String())
	}
	ct.fields = f
	// RFC 9440: the DER certificate as a structured-field byte sequence.
	ct.pem = appendLine(nil, "X-Client-Cert", ":"+base64.StdEncoding.EncodeToString(cert.Raw)+":")
}

// appendLine appends an HTTP/1.1 field line.
func appendLine(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	b = appendSafe(b, value)
	return append(b, "\r\n"...)
}

// appendSafe appends s with control bytes as %XX, so that nothing a
// certificate holds can end a field line.
func appendSafe(b []byte, s string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

// appendXFCCValue appends v as an XFCC value: quoted when it holds a
// character that separates XFCC's elements or pairs.
func appendXFCCValue(b []byte, v string) []byte {
	if strings.ContainsAny(v, ",;=\"") {
		return appendXFCCQuoted(b, v)
	}
	return appendSafe(b, v)
}

// appendXFCCQuoted appends v in double quotes, a quote in it escaped with
// a backslash, as Envoy writes it.
func appendXFCCQuoted(b []byte, v string) []byte {
	b = append(b, '"')
	b = appendSafe(b, strings.ReplaceAll(v, `"`, `\"`))
	return append(b, '"')
}

// clientCertNames are the fields relay writes about client certificates,
// kept out of every request's trailers: from a client they are forgeries.
const clientCertNames = "x-forwarded-client-cert,x-client-cert,x-client-cert-subject,x-client-cert-issuer," +
	"x-client-cert-serial,x-client-cert-fingerprint,x-client-cert-dns,x-client-cert-uri,"

// isClientCertField reports whether f is one of clientCertNames.
func isClientCertField(f *h1.Field) bool {
	switch len(f.Name) {
	case len("x-forwarded-client-cert"):
		return f.Is("x-forwarded-client-cert")
	case len("x-client-cert"):
		return f.Is("x-client-cert")
	case len("x-client-cert-subject"):
		return f.Is("x-client-cert-subject")
	case len("x-client-cert-issuer"): // and -serial
		return f.Is("x-client-cert-issuer") || f.Is("x-client-cert-serial")
	case len("x-client-cert-fingerprint"):
		return f.Is("x-client-cert-fingerprint")
	case len("x-client-cert-dns"): // and -uri
		return f.Is("x-client-cert-dns") || f.Is("x-client-cert-uri")
	}
	return false
}

// clientCertGuard is the feature that keeps a client's own fields about
// client certificates from every backend (the upstream request phase).
// It is on in every core, whatever client_auth says: a listener without
// TLS, or a rule that asks for no certificate, must not let a client
// speak for relay.
type clientCertGuard struct{}

// ClientCertGuard returns the core's feature removing the client's
// X-Forwarded-Client-Cert and X-Client-Cert* fields.
func ClientCertGuard() Feature { return clientCertGuard{} }

// FeatureName names the feature for relay -explain.
func (clientCertGuard) FeatureName() string { return "client certificate fields removed" }

// UpstreamHead marks the client's copies Hop, and keeps them out of the
// trailers.
func (clientCertGuard) UpstreamHead(x *Exchange, out []byte) []byte {
	x.keepOutOfTrailers(clientCertNames)
	fields := x.Req.Fields
	for i := range fields {
		if f := &fields[i]; len(f.Name) >= len("x-client-cert") && isClientCertField(f) {
			f.Hop = true
		}
	}
	return out
}

// ClientCertHeaders is the feature of a route or pool that tells its
// backends about the client's verified certificate: Envoy's
// X-Forwarded-Client-Cert (xfcc), or X-Client-Cert-Subject, -Issuer,
// -Serial, -Fingerprint, -DNS and -URI (fields), with X-Client-Cert, the
// certificate itself, when pem is set. A request without a verified
// certificate gets none of them, and the lines were made with the
// connection: a request writes them with one append.
type ClientCertHeaders struct {
	xfcc, pem bool
}

// NewClientCertHeaders returns the feature for mode ("xfcc" or "fields";
// anything else is none, and nil); pem adds X-Client-Cert to fields.
func NewClientCertHeaders(mode string, pem bool) *ClientCertHeaders {
	switch mode {
	case "xfcc":
		return &ClientCertHeaders{xfcc: true}
	case "fields":
		return &ClientCertHeaders{pem: pem}
	}
	return nil
}

// FeatureName names the feature for relay -explain.
func (h *ClientCertHeaders) FeatureName() string {
	switch {
	case h.xfcc:
		return "client certificate to backends (X-Forwarded-Client-Cert)"
	case h.pem:
		return "client certificate to backends (X-Client-Cert-*, X-Client-Cert)"
	}
	return "client certificate to backends (X-Client-Cert-*)"
}

// UpstreamHead writes the fields of the connection's verified
// certificate.
func (h *ClientCertHeaders) UpstreamHead(x *Exchange, out []byte) []byte {
	ct := x.Peer.Client
	if ct == nil || ct.Cert == nil {
		return out
	}
	if h.xfcc {
		return append(out, ct.xfcc...)
	}
	out = append(out, ct.fields...)
	if h.pem {
		out = append(out, ct.pem...)
	}
	return out
}

// HostRules says which client certificate rule of the TLS listener
// covers a host name (config.ClientAuthHosts): an index, -1 for none.
type HostRules interface {
	Rule(host []byte) int
}

type hostRules struct{ r HostRules }

// SetHostRules gives the core the listener's client certificate rules by
// host, from the next request on; nil says every host has the same rule,
// and no request is misdirected.
func (c *Core) SetHostRules(r HostRules) {
	if r == nil {
		c.hostRules.Store(nil)
		return
	}
	c.hostRules.Store(&hostRules{r})
}

// misdirected is the core's admit-phase check that a TLS request's host
// has the client certificate rule its connection's handshake had (the
// rule of its SNI name, the default rule without one): else another host
// would be reached past the rule its name asks for, say a connection
// opened for a name that asks no certificate sending requests to one that
// requires one, and relay answers 421 Misdirected Request (RFC 9110
// 15.5.20), which a client answers on a new connection. HTTP/2
// connections coalesced over several names are held to it stream by
// stream. Cleartext requests, and every request while all hosts share
// one rule, pass.
type misdirected struct{ c *Core }

// Misdirection returns the core's check for requests whose host falls
// under another client certificate rule than their connection's.
func Misdirection(c *Core) Feature { return misdirected{c} }

// FeatureName names the feature for relay -explain.
func (misdirected) FeatureName() string { return "misdirected requests (421)" }

// Admit answers 421 when x's host and its connection's SNI name fall
// under different rules.
func (m misdirected) Admit(x *Exchange, _ time.Time) (Outcome, bool) {
	ct := x.Peer.Client
	if ct == nil {
		return Outcome{}, false
	}
	hr := m.c.hostRules.Load()
	if hr == nil {
		return Outcome{}, false
	}
	if hr.r.Rule(x.Req.Host) == hr.r.Rule(ct.name) {
		return Outcome{}, false
	}
	return x.answerError(421, "this connection's TLS name does not cover the requested host; connect with that host as the TLS name", false), true
}
