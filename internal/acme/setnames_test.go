package acme

import (
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"relay/internal/pebbletest"
)

// TestUnmanagedNameIsNotRenewed: certificates that live 12 s, for two
// names; SetNames takes one back once both are in hand. The other is
// renewed (a second certificate published) while the one taken back is
// not: it was published once, ordered once, left certmagic's cache and
// what the manager holds. Listing it again loads it from storage, with
// no new order.
func TestUnmanagedNameIsNotRenewed(t *testing.T) {
	a := startAnswerer(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: a.httpPort, TLSPort: a.tlsPort, Validity: 12 * time.Second})
	p := newPublished()
	s := settings(ca, a, &certmagic.FileStorage{Path: t.TempDir()}, "keep.relay.test", "drop.relay.test")
	m := startManager(t, a, s, p)
	p.wait(t, "two certificates", func(g map[string][]Issued) bool { return len(g) == 2 })
	removed, err := m.SetNames([]string{"keep.relay.test"})
	// What happened before the name was taken back stays: a renewal
	// that came due while the other name was still being ordered (the
	// certificates live 12 s) may have been ordered and published.
	p.mu.Lock()
	drops0 := len(p.got["drop.relay.test"])
	p.mu.Unlock()
	orders0 := ca.OrdersFor("drop.relay.test")
	t.Logf("at SetNames: drop published %d, ordered %d; counts %+v", drops0, orders0, m.Counts())
	if err != nil || !slices.Equal(removed, []string{"drop.relay.test"}) {
		t.Fatalf("SetNames: removed %q, err %v; want [drop.relay.test]", removed, err)
	}
	if n := len(m.cache.AllMatchingCertificates("drop.relay.test")); n != 0 {
		t.Errorf("certmagic's cache still holds %d certificates for the name taken back", n)
	}
	if slices.ContainsFunc(m.Held(), func(is Issued) bool { return is.Names[0] == "drop.relay.test" }) {
		t.Error("the manager still holds the certificate of the name taken back")
	}
	p.wait(t, "keep's renewal", func(g map[string][]Issued) bool { return len(g["keep.relay.test"]) >= 2 })
	p.mu.Lock()
	drops := len(p.got["drop.relay.test"])
	p.mu.Unlock()
	if drops != drops0 || ca.OrdersFor("drop.relay.test") != orders0 {
		t.Errorf("the name taken back: %d certificates published, %d orders; want %d and %d, as when it was taken back", drops, ca.OrdersFor("drop.relay.test"), drops0, orders0)
	}
	if _, err := m.SetNames([]string{"keep.relay.test", "drop.relay.test"}); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "drop again, from storage", func(g map[string][]Issued) bool {
		return len(g["drop.relay.test"]) > drops0 && m.Listed("drop.relay.test") && len(m.cache.AllMatchingCertificates("drop.relay.test")) == 1
	})
	if n := ca.OrdersFor("drop.relay.test"); n != orders0 {
		t.Errorf("listed again: %d orders, want %d (loaded from storage)", n, orders0)
	}
}
