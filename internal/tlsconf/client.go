package tlsconf

import (
	"crypto/tls"
	"net/url"

	"relay/internal/config"
)

// sessionCacheSize is how many TLS sessions relay remembers per https
// backend, so that new connections resume instead of a full handshake.
const sessionCacheSize = 64

// Client returns how relay speaks TLS to the https backend at u with
// settings t: the name to verify and send by SNI (t.ServerName, else the
// URL's host), the roots to verify against (t.CAFile, else the system's),
// the certificate to present when asked (mutual TLS), and a session cache.
// It returns nil for an http backend.
func Client(u *url.URL, t config.UpstreamTLS) (*tls.Config, error) {
	if u == nil || u.Scheme != "https" {
		return nil, nil
	}
	tc := &tls.Config{
		ServerName:         u.Hostname(),
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"}, // H2 makes the copy for h2 backends
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize),
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
	if t.ServerName != "" {
		tc.ServerName = t.ServerName
	}
	if t.CAFile != "" {
		pool, err := config.LoadCAFile(t.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if t.ClientCertFile != "" {
		pair, err := config.LoadCertificate(config.Certificate{CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile})
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// H2 returns a copy of tc, an https backend's settings from Client, that
// offers only HTTP/2 by ALPN, for connections to a backend relay speaks h2
// to. The copy shares tc's session cache, so it resumes tc's sessions. The
// backend's own settings keep offering HTTP/1.1: health checks and pools
// that speak HTTP/1.1 to the same address use them. A connection made with
// the copy speaks HTTP/2 only if the handshake chose "h2"
// (ConnectionState().NegotiatedProtocol): a server that knows no ALPN
// chooses nothing.
func H2(tc *tls.Config) *tls.Config {
	if tc == nil {
		return nil
	}
	h2 := tc.Clone()
	h2.NextProtos = []string{"h2"}
	return h2
}
