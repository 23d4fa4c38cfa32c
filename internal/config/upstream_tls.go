package config

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// UpstreamTLS says how relay connects to an https backend. The zero
// value verifies the backend's certificate against the system's roots
// under the host name of its URL.
type UpstreamTLS struct {
	// CAFile is a PEM bundle of the certificate authorities to trust
	// instead of the system's.
	CAFile string `json:"ca_file,omitempty"`
	// ServerName is the name sent by SNI and verified in the backend's
	// certificate instead of the URL's host.
	ServerName string `json:"server_name,omitempty"`
	// ClientCertFile and ClientKeyFile are the certificate relay presents
	// to backends that ask for one (mutual TLS).
	ClientCertFile string `json:"client_cert_file,omitempty"`
	ClientKeyFile  string `json:"client_key_file,omitempty"`
	// InsecureSkipVerify accepts any certificate; relay warns when it is
	// on.
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
}

// upstreamTLSKeys are the per-backend keys; the top-level defaults are the
// same with backend_ in front.
var upstreamTLSKeys = []string{"tls_ca_file", "tls_server_name", "tls_client_cert_file", "tls_client_key_file", "tls_insecure_skip_verify"}

// decodeUpstreamTLS sets the field of t that key names.
func decodeUpstreamTLS(d *decoder, t *UpstreamTLS, key, path string, v *yaml.Node) {
	if key == "tls_insecure_skip_verify" {
		if b, ok := d.boolean(v, path); ok {
			t.InsecureSkipVerify = b
		}
		return
	}
	s, ok := d.str(v, path)
	if !ok {
		return
	}
	switch key {
	case "tls_ca_file":
		t.CAFile = s
	case "tls_server_name":
		t.ServerName = s
	case "tls_client_cert_file":
		t.ClientCertFile = s
	case "tls_client_key_file":
		t.ClientKeyFile = s
	}
}

// upstreamTLSField is a pool's default for its https backends
// (backend_tls_...).
func upstreamTLSField(key string) field {
	return field{key: "backend_" + key, pool: func(d *decoder, p *Pool, v *yaml.Node, path string) {
		decodeUpstreamTLS(d, &p.BackendTLS, key, path, v)
	}}
}

// Set reports whether any setting differs from the zero value.
func (t UpstreamTLS) Set() bool { return t != UpstreamTLS{} }

// over returns t with every unset field taken from defaults;
// insecureSet says t's InsecureSkipVerify was given, so that a backend's
// false overrides a default of true.
func (t UpstreamTLS) over(defaults UpstreamTLS, insecureSet bool) UpstreamTLS {
	if t.CAFile == "" {
		t.CAFile = defaults.CAFile
	}
	if t.ServerName == "" {
		t.ServerName = defaults.ServerName
	}
	if t.ClientCertFile == "" && t.ClientKeyFile == "" {
		t.ClientCertFile, t.ClientKeyFile = defaults.ClientCertFile, defaults.ClientKeyFile
	}
	if !insecureSet {
		t.InsecureSkipVerify = defaults.InsecureSkipVerify
	}
	return t
}

// TLSProblem is one thing wrong with a set of TLS settings: Key names the
// setting it is reported under (the one that is set, or whose file is
// wrong), Msg says what is wrong.
type TLSProblem struct{ Key, Msg string }

// Problems lists what is wrong with t, loading its files.
func (t UpstreamTLS) Problems() []TLSProblem {
	var ps []TLSProblem
	add := func(key, msg string) { ps = append(ps, TLSProblem{key, msg}) }
	if t.CAFile != "" {
		if _, err := LoadCAFile(t.CAFile); err != nil {
			add("tls_ca_file", err.Error())
		}
	}
	switch {
	case t.ClientCertFile == "" && t.ClientKeyFile == "":
	case t.ClientCertFile == "":
		add("tls_client_key_file", "tls_client_key_file is set without tls_client_cert_file")
	case t.ClientKeyFile == "":
		add("tls_client_cert_file", "tls_client_cert_file is set without tls_client_key_file")
	default:
		if _, err := LoadCertificate(Certificate{CertFile: t.ClientCertFile, KeyFile: t.ClientKeyFile}); err != nil {
			add("tls_client_cert_file", "client "+err.Error())
		}
	}
	if t.ServerName != "" && !validHost(t.ServerName) {
		add("tls_server_name", fmt.Sprintf("tls_server_name %s is not a host name", quote(t.ServerName)))
	}
	return ps
}

// LoadCAFile reads a PEM bundle of CA certificates.
func LoadCAFile(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %s", quote(file), unwrapPath(err).Error())
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", quote(file))
	}
	return pool, nil
}

// checkUpstreamTLS reports TLS settings on backends that do not use TLS
// and settings that do not load.
func (p *Pool) checkUpstreamTLS(errs *Errors, s site) {
	if p.BackendTLS.Set() {
		for _, tp := range p.BackendTLS.Problems() {
			pr := s.at("backend_" + tp.Key)
			pr.Msg = strings.Replace(tp.Msg, "tls_", "backend_tls_", 1)
			errs.add(pr)
		}
	}
	for i, b := range p.Backends {
		if !b.TLS.Set() || b.URL == nil {
			continue
		}
		if !strings.EqualFold(b.URL.Scheme, "https") {
			pr := s.backendAt(i, b.tlsKey, b.tlsLine)
			pr.Msg = fmt.Sprintf("%s applies to https backends only; this one is %s", b.tlsKey, b.URL.Scheme)
			errs.add(pr)
			continue
		}
		for _, tp := range b.TLS.Problems() {
			pr := s.backendAt(i, b.tlsKey, b.tlsLine)
			pr.Msg = tp.Msg
			errs.add(pr)
		}
	}
}
