package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relay/internal/testcert"
)

// relay asks TLS clients for certificates by client_auth, in every
// process alike: a client without one is refused, one with a good one is
// served and its backend hears of it (X-Forwarded-Client-Cert, the
// default with a rule that asks), the access log names its subject, and a
// certificate revoked by a CRL replaced on disk is refused after a reload
// by every process, without a restart. -check judges the section.
func TestClientCertificates(t *testing.T) {
	forProcesses(t, clientCertificates)
}

func clientCertificates(t *testing.T, processes int) {
	srvCA, clients := testcert.NewCA(t), testcert.NewCA(t)
	good := clients.Client(t, "payments")
	crl := clients.WriteCRL(t, filepath.Join(t.TempDir(), "clients.crl"))
	var mu sync.Mutex
	var xfcc []string
	be := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Forwarded-For") != "" { // not a health check
				mu.Lock()
				xfcc = append(xfcc, r.Header.Get("X-Forwarded-Client-Cert"))
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	file := writeConfig(t, fmt.Sprintf("processes: %d\naccess_log: true\ntls_listen: 127.0.0.1:0\n", processes)+
		certsYAML(srvCA.Server(t, testcert.ECDSA, "api.example.com"))+
		fmt.Sprintf("client_auth:\n  - mode: require\n    ca_files: [%s]\n    crl_files: [%s]\n", clients.File, crl)+
		backendsYAML([]string{be.url}))
	if code, _, stderr := runRelay(t, "-check", "-config", file); code != 0 {
		t.Fatalf("relay -check: exit %d\n%s", code, stderr)
	}
	r, started := startRelay(t, "", "-config", file)
	_, port, _ := net.SplitHostPort(started.Str("tls_listen"))
	addr := net.JoinHostPort("127.0.0.1", port)

	// get sends one request over a new connection and returns the status
	// line, or the error of a refused connection.
	get := func(cert *testcert.Pair) (string, error) {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: srvCA.Pool, ServerName: "api.example.com", NextProtos: []string{"http/1.1"},
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return &cert.TLS, nil
			}})
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\nX-Forwarded-Client-Cert: Hash=forged\r\n\r\n"); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		if err != nil && len(b) == 0 {
			return "", err
		}
		line, _, _ := strings.Cut(string(b), "\r\n")
		return line, nil
	}
	const n = 10
	for range n {
		if line, err := get(good); err != nil || line != "HTTP/1.1 200 OK" {
			t.Fatalf("a good certificate: %q %v", line, err)
		}
	}
	if line, err := get(nil); err == nil {
		t.Errorf("no certificate: %q, want the handshake refused", line)
	}
	mu.Lock()
	if len(xfcc) != n || !strings.Contains(xfcc[0], `Subject="CN=payments"`) || strings.Contains(xfcc[0], "forged") {
		t.Errorf("the backend got X-Forwarded-Client-Cert %q", xfcc)
	}
	mu.Unlock()
	if l, ok := r.waitLog(5*time.Second, func(l logLine) bool { return l.Msg() == "access" }); !ok || l.Str("client_cert_subject") != "CN=payments" {
		t.Errorf("access line %v, want client_cert_subject CN=payments", l)
	}

	// Revoked on disk, then reloaded: every process refuses it.
	clients.WriteCRL(t, crl, good.Cert)
	r.signal(syscall.SIGHUP)
	if _, ok := r.waitLog(10*time.Second, func(l logLine) bool { return l.Msg() == "configuration reloaded" }); !ok {
		t.Fatal("relay did not reload")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := get(good); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a certificate the reloaded CRL revokes is still served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // every process takes the reload
	for range n {
		if line, err := get(good); err == nil {
			t.Fatalf("after the reload a process served a revoked certificate: %q", line)
		}
	}
}

// relay -check names the key of a bad client_auth value, with its line.
func TestClientAuthCheck(t *testing.T) {
	srvCA := testcert.NewCA(t)
	missing := filepath.Join(t.TempDir(), "x.pem")
	file := writeConfig(t, "tls_listen: 127.0.0.1:0\n"+certsYAML(srvCA.Server(t, testcert.ECDSA, "api.example.com"))+
		"client_auth:\n  - hosts: [www.example.com]\n  - hosts: [api.example.com]\n    mode: require\n    ca_files: ["+missing+"]\n"+
		backendsYAML([]string{"http://127.0.0.1:9"}))
	code, _, stderr := runRelay(t, "-check", "-config", file)
	want := fmt.Sprintf(`:11: client_auth[1].ca_files[0]: %q: no such file or directory`, missing)
	if code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("relay -check: exit %d\n%s\nwant a line ending %s", code, stderr, want)
	}
}
