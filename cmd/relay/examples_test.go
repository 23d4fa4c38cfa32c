package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"relay/internal/testcert"
)

// etcRelay matches the files the examples name under /etc/relay.
var etcRelay = regexp.MustCompile(`/etc/relay/[A-Za-z0-9._-]+`)

// logDir is the directory of the log files the examples name.
const logDir = "/var/log/relay/"

// TestExamplesPassCheck runs relay -check on every example configuration,
// as a reader would before using one. Certificate, key and CA files the
// examples name under /etc/relay are made for the test in a directory of
// its own, log files under /var/log/relay go to an empty directory (-check
// wants their directory writable), and the file is checked with those
// directories in their place; every other line is checked as written.
func TestExamplesPassCheck(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../examples/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d examples, want at least config, original, production and tls: %v", len(files), files)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			if etcRelay.MatchString(text) {
				text = withTestFiles(t, text)
			}
			text = strings.ReplaceAll(text, logDir, t.TempDir()+"/")
			path := writeFile(t, t.TempDir(), name, text)
			code, stdout, stderr := runRelay(t, "-check", "-config", path)
			if code != 0 || !strings.HasPrefix(stdout, path+": ok") {
				t.Fatalf("relay -check %s: exit %d\nstdout: %s\nstderr: %s", name, code, stdout, stderr)
			}
		})
	}
}

// withTestFiles makes the PEM files text names under /etc/relay (NAME.crt
// with NAME.key: a certificate for NAME and its key; NAME.pem: a CA) in a
// temporary directory and returns text naming them there.
func withTestFiles(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	for _, f := range etcRelay.FindAllString(uncommented(text), -1) {
		base := filepath.Base(f)
		dst := filepath.Join(dir, base)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		stem := strings.TrimSuffix(strings.TrimSuffix(base, ".crt"), ".key")
		switch filepath.Ext(base) {
		case ".crt", ".key":
			p := ca.Server(t, testcert.ECDSA, stem)
			copyFile(t, p.CertFile, filepath.Join(dir, stem+".crt"))
			copyFile(t, p.KeyFile, filepath.Join(dir, stem+".key"))
		case ".pem":
			copyFile(t, ca.File, dst)
		default:
			t.Fatalf("an example names %s, and the test does not know what to put there", f)
		}
	}
	return strings.ReplaceAll(text, "/etc/relay/", dir+"/")
}

// uncommented is text without its YAML comments, which may name files
// (the configuration's own path, in a command to run) that the settings do
// not. None of the examples has a # inside a value.
func uncommented(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		lines[i], _, _ = strings.Cut(line, "#")
	}
	return strings.Join(lines, "\n")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
