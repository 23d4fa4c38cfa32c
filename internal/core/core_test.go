package core

import (
	"strings"
	"testing"
	"time"

	"relay/internal/config"
)

func poolConfig(name string) PoolConfig {
	return PoolConfig{Name: name, Algorithm: "round-robin", Retries: 2,
		ConnectTimeout: time.Second, ResponseTimeout: time.Second, MaxIdlePerBackend: 4, IdleTimeout: time.Minute}
}

// TestPools: the first pool is the default one, names are unique, and a
// pool's problems are reported together, naming the pool.
func TestPools(t *testing.T) {
	c := New(Config{})
	a, err := c.AddPool(poolConfig("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.AddPool(poolConfig("b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := c.route(&Exchange{}); p != a || c.Pool("b") != b || c.Pool("c") != nil {
		t.Fatal("the first pool added is not the one requests go to, or a pool is not found by name")
	}
	if _, err := c.AddPool(poolConfig("a"), nil); err == nil || !strings.Contains(err.Error(), `pool "a" is defined twice`) {
		t.Fatalf("a second pool named a: %v", err)
	}
	bad := poolConfig("bad")
	bad.Algorithm = "fastest"
	if _, err := c.AddPool(bad, nil); err == nil || !strings.Contains(err.Error(), `pool "bad": unknown algorithm "fastest"`) {
		t.Fatalf("unknown algorithm: %v", err)
	}
	bad = PoolConfig{Name: "bad", Algorithm: "p2c", Retries: -1}
	_, err = c.AddPool(bad, nil)
	for _, want := range []string{`pool "bad"`, "retries -1 is outside 0..7", "connect timeout", "response timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

// The configuration bounds retries by what the core remembers.
func TestMaxRetriesAgreesWithTheConfiguration(t *testing.T) {
	if MaxRetries != config.MaxRetries {
		t.Fatalf("the core tries %d retries at most, the configuration allows %d", MaxRetries, config.MaxRetries)
	}
}
