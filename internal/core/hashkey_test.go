package core

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/h1"
)

// TestHashKeyValues: each hash_key source hashes exactly its value, found
// in place, without allocating; a request without it hashes its client.
func TestHashKeyValues(t *testing.T) {
	c := &Core{}
	peer := &Peer{Addr: netip.MustParseAddrPort("192.0.2.1:5000")}
	client := balance.HashAddr(peer.Addr.Addr())
	x := &Exchange{Peer: peer, Req: &h1.Request{
		Target: []byte("/shop/cart?userx=9&user=ann&x=1"),
		Fields: []h1.Field{
			{Name: []byte("Cookie"), Value: []byte("theme=dark; sid2=x")},
			{Name: []byte("X-User"), Value: []byte("bob")},
			{Name: []byte("cookie"), Value: []byte("sid=abc;lang=en")},
			{Name: []byte("X-Empty"), Value: nil},
		},
	}}
	tests := []struct {
		key  string
		want uint64
	}{
		{"client", client},
		{"header:X-User", balance.HashKey([]byte("bob"))},
		{"header:x-user", balance.HashKey([]byte("bob"))},
		{"header:X-Empty", client},
		{"header:X-None", client},
		{"cookie:sid", balance.HashKey([]byte("abc"))},
		{"cookie:lang", balance.HashKey([]byte("en"))},
		{"cookie:SID", client},
		{"cookie:none", client},
		{"query:user", balance.HashKey([]byte("ann"))},
		{"query:x", balance.HashKey([]byte("1"))},
		{"query:use", client},
		{"path", balance.HashKey([]byte("/shop/cart"))},
	}
	for _, tt := range tests {
		k, err := balance.ParseKeySpec(tt.key)
		if err != nil {
			t.Fatal(err)
		}
		if got := x.hashKey(c, k); got != tt.want {
			t.Errorf("%s: key %#x, want %#x", tt.key, got, tt.want)
		}
		if n := testing.AllocsPerRun(100, func() { x.hashKey(c, k) }); n != 0 {
			t.Errorf("%s: %v allocations per key, want 0", tt.key, n)
		}
	}
}

// TestHashBalanceFactorReachesThePicker: a pool's HashBalanceFactor is
// checked, and a reload that sets it rebuilds the picker with it, so a key
// whose backend is over the bound moves.
func TestHashBalanceFactorReachesThePicker(t *testing.T) {
	c := New(Config{})
	pc := poolConfig("a")
	pc.Algorithm = "ip-hash"
	pc.HashBalanceFactor = 99
	if _, err := c.AddPool(pc, nil); err == nil || !strings.Contains(err.Error(), "hash balance factor 99 is outside 100..1000") {
		t.Fatalf("factor 99: %v", err)
	}
	pc.HashBalanceFactor = 0
	var bs []*backend.Backend
	for _, host := range []string{"a", "b", "c"} {
		b, err := backend.New(&url.URL{Scheme: "http", Host: host + ":80"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	p, err := c.AddPool(pc, bs)
	if err != nil {
		t.Fatal(err)
	}
	const key = 12345
	own := p.state.Load().picker.Pick(key, balance.Filter{})
	for range 10 {
		own.Acquire() // ten in flight, all on the key's backend
	}
	if got := p.state.Load().picker.Pick(key, balance.Filter{}); got != own {
		t.Fatal("without a factor the key left its loaded backend")
	}
	pc.HashBalanceFactor = 150
	if err := p.Reconfigure(pc); err != nil {
		t.Fatal(err)
	}
	if got := p.state.Load().picker.Pick(key, balance.Filter{}); got == own {
		t.Fatal("with factor 150 the key stayed on its backend holding every request in flight")
	}
}
