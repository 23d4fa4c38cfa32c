package main

import (
	"context"
	"encoding/xml"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/testcert"
)

// h2specEnv names the h2spec binary TestH2spec runs; .ci/run builds it.
const h2specEnv = "RELAY_H2SPEC"

// h2specExpected are the h2spec cases relay is known to fail, by
// transport. Over h2c, a connection that does not open with the HTTP/2
// preface is served as HTTP/1.1 (it may be one), so h2spec's invalid
// preface is answered 400 rather than by a closed connection; Go's own
// server fails that case the same way.
var h2specExpected = map[string][]string{
	"tls": nil,
	"h2c": {"http2/3.5: Sends invalid connection preface"},
}

// TestH2spec runs the h2spec conformance suite (all 145 cases of HTTP/2
// and HPACK) against relay over TLS and over h2c, with a backend in the
// test, and fails if relay fails a case other than those it is known to
// fail. It runs when RELAY_H2SPEC names an h2spec binary (v2.2.1).
func TestH2spec(t *testing.T) {
	bin := os.Getenv(h2specEnv)
	if bin == "" {
		t.Skip(h2specEnv + " does not name an h2spec binary; .ci/run builds one and sets it")
	}
	ca := testcert.NewCA(t)
	tr := startTLSRelay(t, ca, "", ca.Server(t, testcert.ECDSA, "127.0.0.1"))
	for _, side := range []string{"tls", "h2c"} {
		addr := tr.addr
		args := []string{"-o", "2"}
		if side == "tls" {
			addr = tr.tlsAddr
			args = append(args, "-t", "-k")
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		report := filepath.Join(t.TempDir(), side+".xml")
		args = append(args, "-h", host, "-p", port, "-j", report)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		start := time.Now()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		cancel()
		// h2spec exits 1 when a case fails: the report says which.
		failed, total, rerr := h2specFailures(report)
		if rerr != nil {
			t.Fatalf("h2spec over %s: %v (%v)\n%s", side, rerr, err, out)
		}
		t.Logf("h2spec over %s: %d cases, %d failed, in %v", side, total, len(failed), time.Since(start).Round(time.Millisecond))
		if total < 145 {
			t.Errorf("h2spec over %s ran %d cases, want all 145", side, total)
		}
		for _, c := range failed {
			if !slices.Contains(h2specExpected[side], c) {
				t.Errorf("h2spec over %s: relay fails %s", side, c)
			}
		}
		if t.Failed() {
			t.Logf("h2spec's output:\n%s", out)
		}
	}
}

// h2specFailures reads an h2spec JUnit report: the cases that failed,
// erred or were skipped, as "package: name", and how many cases ran.
func h2specFailures(path string) (failed []string, total int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var r struct {
		Suites []struct {
			Tests string `xml:"tests,attr"`
			Cases []struct {
				Package string    `xml:"package,attr"`
				Name    string    `xml:"classname,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &r); err != nil {
		return nil, 0, err
	}
	for _, s := range r.Suites {
		n, err := strconv.Atoi(s.Tests)
		if err != nil {
			return nil, 0, err
		}
		total += n
		for _, c := range s.Cases {
			if c.Failure != nil || c.Error != nil || c.Skipped != nil {
				failed = append(failed, c.Package+": "+strings.TrimSpace(c.Name))
			}
		}
	}
	return failed, total, nil
}
