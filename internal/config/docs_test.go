package config

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// referenceHeader is the header row of every key table in
// docs/configuration.md; other tables there (flags) are not read.
const referenceHeader = "| key | default | applied | meaning |"

// nestedKeys are the keys read inside a section or a list entry, each
// with the top-level key whose reload rule they follow.
var nestedKeys = []struct {
	keys   []string
	parent string
}{
	{certificateKeys, "tls_certificates"},
	{clientAuthKeys, "client_auth"},
	{clientAllowKeys, "client_auth"},
	{backendKeys, "backends"},
	{discoveryKeys, "discovery"},
	{stickyKeys, "sticky"},
	{etcdKeys, "discovery"},
	{announceKeys, "discovery"},
	{routeKeys, "routes"},
	{matchKeys, "routes"},
	{headerActionKeys, "routes"},
	{rateLimitKeys, "rate_limit"},
	{compressKeys, "compress"},
	// acme.storage's prefix shares its name with discovery.etcd's,
	// which a reload applies; the storage row describes it.
	{acmeKeys, "acme"},
	{slices.DeleteFunc(slices.Clone(acmeStorageKeys), func(k string) bool { return k == "prefix" }), "acme"},
	// acme.on_demand's allow shares its name with client_auth's, which
	// a reload applies; the on_demand row describes it.
	{slices.DeleteFunc(slices.Clone(acmeOnDemandKeys), func(k string) bool { return k == "allow" }), "acme"},
	// The exporter's keys (endpoint, headers, ca_file and the rest) are
	// described by the exporter row.
	{tracingKeys, "tracing"},
	// redirect's port shares its name with the top-level port, which a
	// reload does not apply; its row would contradict port's, so the
	// redirect row describes it.
	{slices.DeleteFunc(slices.Clone(redirectKeys), func(k string) bool { return k == "port" }), "routes"},
	// redis's username, password and prefix share their names with
	// discovery.etcd's, which a reload applies; the redis row describes
	// them.
	{slices.DeleteFunc(slices.Clone(redisKeys), func(k string) bool { return k == "username" || k == "password" || k == "prefix" }), "redis"},
}

// referenceRows reads the key tables of docs/configuration.md into key ->
// applied column ("reload" or "restart"), failing on a key listed twice.
func referenceRows(t *testing.T, text string) map[string]string {
	t.Helper()
	cell := regexp.MustCompile("^`([a-z0-9_]+)`$")
	rows := map[string]string{}
	inTable := false
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == referenceHeader:
			inTable = true
			continue
		case !strings.HasPrefix(line, "|"):
			inTable = false
			continue
		case !inTable || strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			t.Errorf("docs/configuration.md:%d: a key row needs 4 cells: %s", n+1, line)
			continue
		}
		m := cell.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			t.Errorf("docs/configuration.md:%d: first cell is not one `key`: %s", n+1, line)
			continue
		}
		// Nested sections share names (url, prefix, weight); each must
		// say the same thing about reload, which the checks below hold.
		applied := strings.TrimSpace(cells[2])
		if prev, dup := rows[m[1]]; dup && prev != applied {
			t.Errorf("docs/configuration.md:%d: %s listed again with applied %q (was %q)", n+1, m[1], applied, prev)
		}
		rows[m[1]] = applied
	}
	return rows
}

// TestReferenceListsEveryKey keeps docs/configuration.md and
// examples/config.yml in step with the code: every key relay reads has a
// row in the reference and appears in the example, the reference's
// applied column agrees with LiveKeys, and the reference documents no
// key relay does not read.
func TestReferenceListsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/config.yml")
	if err != nil {
		t.Fatal(err)
	}
	rows := referenceRows(t, string(doc))
	want := func(live bool) string {
		if live {
			return "reload"
		}
		return "restart"
	}
	known := map[string]bool{}
	for _, k := range Keys() {
		known[k] = true
		applied, ok := rows[k]
		if !ok {
			t.Errorf("docs/configuration.md has no row for %q", k)
		} else if w := want(slices.Contains(LiveKeys, k)); applied != w {
			t.Errorf("docs/configuration.md says %q is applied at %q; config.LiveKeys says %q", k, applied, w)
		}
		// Top-level keys start a line, set or shown commented out.
		if !regexp.MustCompile(`(?m)^(# ?)?` + regexp.QuoteMeta(k) + `:`).Match(example) {
			t.Errorf("examples/config.yml does not show %q at the start of a line", k)
		}
	}
	for _, n := range nestedKeys {
		for _, k := range n.keys {
			// A key inside a split section (acme.domains) has its own
			// rule; the others follow their section's.
			w := want(slices.Contains(LiveKeys, n.parent) || slices.Contains(LiveKeys, n.parent+"."+k))
			known[k] = true
			applied, ok := rows[k]
			if !ok {
				t.Errorf("docs/configuration.md has no row for %q (inside %s)", k, n.parent)
			} else if applied != w {
				t.Errorf("docs/configuration.md says %q (inside %s) is applied at %q; config.LiveKeys says %q", k, n.parent, applied, w)
			}
			if !regexp.MustCompile(`(?m)^[#\s-]*` + regexp.QuoteMeta(k) + `:`).Match(example) {
				t.Errorf("examples/config.yml does not show %q (inside %s)", k, n.parent)
			}
		}
	}
	for k := range rows {
		if !known[k] {
			t.Errorf("docs/configuration.md documents %q, which relay does not read", k)
		}
	}
}
