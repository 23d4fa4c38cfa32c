package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"relay/internal/testcert"
)

var update = flag.Bool("update", false, "rewrite testdata/loaded from the files as they load now")

// laterFields are the settings added after the goldens in testdata/loaded
// were written (a backend's Protocol among them); the goldens say nothing
// about them.
var laterFields = []string{"Pools", "PoolNames", "Routes", "EscapedSlashes", "Sticky", "RateLimit", "HashKey", "HashBalanceFactor", "Redis",
	"Protocol", "BreakerGRPCStatuses", "MaxGRPCTimeout", "ClientAuth", "ClientCertHeaders", "ClientCertPEM"}

// TestOneServiceFilesLoadUnchanged: every example file, and a file of one
// service with every pool key set, loads into the same settings as it did
// before relay had named pools and routes (testdata/loaded holds what the
// code of that time made of them).
func TestOneServiceFilesLoadUnchanged(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "testdata/onepool.yml")
	for _, file := range files {
		name := filepath.Base(file)
		if name == "routes.yml" || name == "grpc.yml" {
			continue // written with routes, or for gRPC: it has no one-pool past
		}
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			dir := etcRelayFiles(t, string(data))
			c, err := Parse([]byte(strings.ReplaceAll(string(data), "/etc/relay/", dir+"/")), file, testOpts)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.ReplaceAll(renderSettings(c), dir+"/", "/etc/relay/")
			golden := filepath.Join("testdata", "loaded", strings.TrimSuffix(name, ".yml")+".txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s loads differently from before:\n got:\n%s\nwant:\n%s", file, got, want)
			}
		})
	}
}

// etcRelayFiles makes the certificate, key and CA files that text names
// under /etc/relay in a directory of the test's, which it returns.
func etcRelayFiles(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	for _, f := range regexp.MustCompile(`/etc/relay/[A-Za-z0-9._-]+`).FindAllString(text, -1) {
		base := filepath.Base(f)
		stem := strings.TrimSuffix(strings.TrimSuffix(base, ".crt"), ".key")
		switch filepath.Ext(base) {
		case ".crt", ".key":
			p := ca.Server(t, testcert.ECDSA, stem)
			copyTo(t, p.CertFile, filepath.Join(dir, stem+".crt"))
			copyTo(t, p.KeyFile, filepath.Join(dir, stem+".key"))
		case ".pem":
			copyTo(t, ca.File, filepath.Join(dir, base))
		}
	}
	return dir
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// renderSettings writes every exported setting of c, promoted ones
// included, one per line in name order, so two Configs are compared by
// what they say and not by how the struct is laid out.
func renderSettings(c *Config) string {
	v := reflect.ValueOf(c).Elem()
	var lines []string
	for _, f := range reflect.VisibleFields(v.Type()) {
		if !f.IsExported() || f.Anonymous || slices.Contains(laterFields, f.Name) {
			continue
		}
		lines = append(lines, f.Name+"="+renderValue(v.FieldByIndex(f.Index)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func renderValue(v reflect.Value) string {
	if v.CanInterface() {
		if s, ok := v.Interface().(fmt.Stringer); ok && (v.Kind() != reflect.Pointer || !v.IsNil()) {
			return s.String()
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "nil"
		}
		return renderValue(v.Elem())
	case reflect.Struct:
		var parts []string
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && !slices.Contains(laterFields, f.Name) {
				parts = append(parts, v.Type().Field(i).Name+":"+renderValue(v.Field(i)))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	case reflect.Slice:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, renderValue(v.Index(i)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v.Interface())
}
