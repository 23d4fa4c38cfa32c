package supervisor

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"relay/internal/stats"
	"relay/internal/testsock"
)

const ioTimeout = 10 * time.Second

// TestChannelRoundTrip sends every kind of message each way over a real
// socket pair and reads back exactly what was sent.
func TestChannelRoundTrip(t *testing.T) {
	a, b := testsock.Pair(t)
	sup, proc := NewChannel(a), NewChannel(b)
	down := []Message{
		{Kind: KindConfig, Config: &ConfigSource{Generation: 3, Name: "relay.yml", Data: []byte("backends:\n  - url: http://127.0.0.1:8001\n")}},
		// Larger than the read buffer: a big configuration file.
		{Kind: KindConfig, Config: &ConfigSource{Generation: 4, Name: "big.yml", Data: []byte(strings.Repeat("# comment line\n", 20000))}},
		{Kind: KindMembership, Membership: []Member{{Pool: "default", URL: "http://127.0.0.1:8001", Weight: 2}, {Pool: "api", URL: "http://[::1]:8002", Weight: 1}}},
		{Kind: KindHealth, Health: &HealthUpdate{Snapshot: true, Backends: []BackendHealth{{Pool: "default", Name: "http://127.0.0.1:8001", Up: true}, {Pool: "api", Name: "http://[::1]:8002"}}}},
		{Kind: KindOperator, Operator: &OperatorState{Pool: "api", Name: "http://127.0.0.1:8001", Draining: true}},
		{Kind: KindCollect, Collect: 7},
		{Kind: KindOnDemand, OnDemand: &OnDemand{ID: 9, Host: "shop.example.com", Reason: "not matched by acme.on_demand.allow"}},
	}
	up := []Message{
		{Kind: KindCounters, Counters: &stats.Process{Backends: []stats.Backend{{Name: "http://127.0.0.1:8001", Served: 12, Failures: 1, InFlight: 2}}}},
		{Kind: KindOnDemand, OnDemand: &OnDemand{ID: 9, Host: "shop.example.com"}},
	}
	check := func(from, to *Channel, msgs []Message) {
		t.Helper()
		go func() {
			for _, m := range msgs {
				from.Send(m)
			}
		}()
		for _, want := range msgs {
			got, err := to.Recv()
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		}
	}
	check(sup, proc, down)
	check(proc, sup, up)
	sup.Close()
	if _, err := proc.Recv(); err != io.EOF {
		t.Fatalf("Recv after the other side closed: %v, want io.EOF", err)
	}
}

// TestChannelRejectsMalformedMessages: whatever arrives broken is an error
// that says what is wrong, and the next good message still reads.
func TestChannelRejectsMalformedMessages(t *testing.T) {
	tests := []struct{ line, errHas string }{
		{"not json\n", "malformed message"},
		{`{"kind":"reload"}` + "\n", `unknown message kind "reload"`},
		{`{"kind":"config"}` + "\n", "without its configuration"},
		{`{"kind":"health","health":{"backends":[{"up":true}]}}` + "\n", "backend 0 has name"},
		{`{"kind":"health","health":{"backends":[{"name":"http://a:1","up":true}]}}` + "\n", `in pool ""`},
		{`{"kind":"membership","membership":[{"url":"http://a:1","weight":1}]}` + "\n", "names no pool"},
		{`{"kind":"operator","operator":{"name":"http://a:1","disabled":true}}` + "\n", "without a pool"},
		{`{"kind":"collect"}` + "\n", "without its number"},
		{`{"kind":"membership","membership":[{"url":"http://a:1","weight":0}]}` + "\n", "member 0"},
		{`{"kind":"counters","counters":{},"operator":{"name":"x"}}` + "\n", "more than one payload"},
		{`{"kind":"on_demand","on_demand":{"host":"a.example.com"}}` + "\n", "without its ID and host"},
		{`{"kind":"on_demand","on_demand":{"id":1,"host":"` + strings.Repeat("a", 254) + `"}}` + "\n", "longer than a DNS name"},
	}
	a, b := testsock.Pair(t)
	ch := NewChannel(b)
	for _, tt := range tests {
		go a.Write([]byte(tt.line))
		_, err := ch.Recv()
		if err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("Recv of %q: %v, want an error saying %q", tt.line, err, tt.errHas)
		}
	}
	go a.Write([]byte(`{"kind":"operator","operator":{"pool":"default","name":"x","disabled":true}}` + "\n"))
	if m, err := ch.Recv(); err != nil || !m.Operator.Disabled {
		t.Fatalf("a good message after bad ones: %+v, %v", m, err)
	}
	go func() { a.Write([]byte(`{"kind":"oper`)); a.Close() }()
	if _, err := ch.Recv(); err == nil || !strings.Contains(err.Error(), "closed inside a message") {
		t.Fatalf("a message cut off: %v", err)
	}
}
