package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Certificate is one certificate relay's TLS listener serves, as PEM
// files: the chain (leaf first) and its private key.
type Certificate struct {
	CertFile string
	KeyFile  string
	// Line is the YAML line of the entry, 0 if it came from flags.
	Line int
}

// TLS versions tls_min_version accepts.
var tlsVersions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// TLSVersion returns the crypto/tls constant of a valid tls_min_version.
func TLSVersion(s string) uint16 { return tlsVersions[s] }

var certificateKeys = []string{"cert_file", "key_file"}

// decodeCertificates reads tls_certificates: a list of mappings with
// cert_file and key_file.
func decodeCertificates(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, "tls_certificates", "must be a list of certificates (- cert_file: FILE\n    key_file: FILE), got %s", describe(v))
		return
	}
	for i, item := range v.Content {
		item = resolve(item)
		prefix := fmt.Sprintf("tls_certificates[%d]", i)
		if item.Kind != yaml.MappingNode {
			d.problem(item.Line, prefix, "must be a mapping with cert_file and key_file, got %s", describe(item))
			continue
		}
		cert := Certificate{Line: item.Line}
		d.mapping(item, prefix+".", certificateKeys, func(key string, k, val *yaml.Node) {
			s, ok := d.str(val, prefix+"."+key)
			if !ok {
				return
			}
			if key == "cert_file" {
				cert.CertFile = s
			} else {
				cert.KeyFile = s
			}
		})
		c.TLSCertificates = append(c.TLSCertificates, cert)
	}
}

// checkTLS reports problems with the TLS listener's settings. Each
// certificate is loaded, so a missing file or a key that does not match
// its certificate is found by relay -check, at start and at reload.
func (c *Config) checkTLS(bad func(key, format string, args ...any)) {
	if c.Listen == "" && c.TLSListen == "" {
		bad("listen", "relay needs a listener: set listen, tls_listen or both")
	}
	if c.TLSListen == "" {
		if len(c.TLSCertificates) > 0 {
			bad("tls_certificates", "certificates are given but tls_listen is not set; set tls_listen (for example \":8443\") to serve TLS")
		}
	} else {
		if msg := checkListen(c.TLSListen); msg != "" {
			bad("tls_listen", "%s", msg)
		}
		if c.Listen != "" && sameAddress(c.Listen, c.TLSListen) {
			bad("tls_listen", "%s is also the cleartext listen address; give each its own port", quote(c.TLSListen))
		}
		if c.AdminListen != "" && sameAddress(c.AdminListen, c.TLSListen) {
			bad("tls_listen", "%s is also the admin listen address; the admin listener is never shared with client traffic", quote(c.TLSListen))
		}
		if len(c.TLSCertificates) == 0 && !c.undecoded["tls_certificates"] && c.ACME == nil && !c.undecoded["acme"] {
			bad("tls_listen", "TLS needs at least one certificate: add tls_certificates with cert_file and key_file, or an acme section to order them")
		}
	}
	for i, cert := range c.TLSCertificates {
		key := fmt.Sprintf("tls_certificates[%d]", i)
		if msg := checkCertificate(cert); msg != "" {
			bad("tls_certificates", "%s: %s", key, msg)
		}
	}
	if _, ok := tlsVersions[c.TLSMinVersion]; !ok {
		bad("tls_min_version", `must be "1.2" or "1.3", got %s%s`, quote(c.TLSMinVersion), didYouMean(c.TLSMinVersion, []string{"1.2", "1.3"}))
	}
}

// checkCertificate loads one certificate and key and says what is wrong
// with them, or "".
func checkCertificate(cert Certificate) string {
	switch {
	case cert.CertFile == "" && cert.KeyFile == "":
		return "cert_file and key_file are missing"
	case cert.CertFile == "":
		return "cert_file is missing"
	case cert.KeyFile == "":
		return "key_file is missing"
	}
	for _, f := range []string{cert.CertFile, cert.KeyFile} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("%s: %s", quote(f), unwrapPath(err).Error())
		}
	}
	if _, err := LoadCertificate(cert); err != nil {
		return err.Error()
	}
	return ""
}

// LoadCertificate reads cert's files into a tls.Certificate, with an
// error that names the files and says what is wrong in words.
func LoadCertificate(cert Certificate) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
	if err == nil {
		return pair, nil
	}
	msg := strings.TrimPrefix(err.Error(), "tls: ")
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		msg = unwrapPath(err).Error()
	case strings.Contains(msg, "does not match"):
		msg = "the private key does not belong to the certificate"
	case strings.Contains(msg, "failed to find any PEM data in certificate"):
		msg = fmt.Sprintf("%s holds no PEM certificate", quote(cert.CertFile))
	case strings.Contains(msg, "failed to find any PEM data in key"), strings.Contains(msg, "failed to find \"PRIVATE KEY\""):
		msg = fmt.Sprintf("%s holds no PEM private key", quote(cert.KeyFile))
	}
	return tls.Certificate{}, fmt.Errorf("certificate %s with key %s: %s", quote(cert.CertFile), quote(cert.KeyFile), msg)
}

// decodeTLSMinVersion reads tls_min_version. Written without quotes, 1.2
// and 1.3 are YAML numbers; their text is the version.
func decodeTLSMinVersion(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!float" {
		c.TLSMinVersion = v.Value
		return
	}
	if s, ok := d.str(v, "tls_min_version"); ok {
		c.TLSMinVersion = s
	}
}
