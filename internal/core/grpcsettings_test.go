package core

import (
	"strings"
	"testing"
	"time"
)

// TestGRPCSettingsValidated: a pool refuses gRPC statuses outside 0..16,
// a negative gRPC timeout cap and a protocol it does not know, naming
// each, and takes the bounds themselves.
func TestGRPCSettingsValidated(t *testing.T) {
	c := New(Config{})
	good := poolConfig("good")
	good.Protocol, good.BackendProtocols = H2C, map[string]Protocol{"https://127.0.0.1:8443": H2}
	good.BreakerGRPCStatuses, good.MaxGRPCTimeout = []int{0, 14, 16}, 0
	if _, err := c.AddPool(good, nil); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
	for _, tt := range []struct {
		name string
		set  func(*PoolConfig)
		want string
	}{
		{"status above 16", func(pc *PoolConfig) { pc.BreakerGRPCStatuses = []int{14, 17} }, "breaker gRPC status 17 is not a gRPC status (0..16)"},
		{"status negative", func(pc *PoolConfig) { pc.BreakerGRPCStatuses = []int{-1} }, "breaker gRPC status -1"},
		{"timeout negative", func(pc *PoolConfig) { pc.MaxGRPCTimeout = -time.Second }, "max gRPC timeout -1s is negative"},
		{"unknown protocol", func(pc *PoolConfig) { pc.Protocol = H2C + 1 }, "protocol protocol(3) is not http/1.1, h2 or h2c"},
		{"unknown backend protocol", func(pc *PoolConfig) { pc.BackendProtocols = map[string]Protocol{"http://127.0.0.1:1": 9} }, "protocol protocol(9) of backend http://127.0.0.1:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pc := poolConfig("bad")
			tt.set(&pc)
			_, err := c.AddPool(pc, nil)
			if err == nil || !strings.Contains(err.Error(), `pool "bad"`) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddPool = %v, want an error naming the pool and saying %q", err, tt.want)
			}
		})
	}
}
