package backend

import (
	"net/url"
	"strings"
	"sync"
	"testing"
)

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(%q): %v", raw, err)
	}
	return u
}

func TestNew(t *testing.T) {
	tests := []struct {
		name     string
		url      string
		weight   int
		wantName string
		wantAddr string
	}{
		{name: "explicit port", url: "http://127.0.0.1:8001", weight: 3, wantName: "http://127.0.0.1:8001", wantAddr: "127.0.0.1:8001"},
		{name: "http default port", url: "http://localhost", weight: 1, wantName: "http://localhost", wantAddr: "localhost:80"},
		{name: "https default port", url: "https://example.com", weight: 1, wantName: "https://example.com", wantAddr: "example.com:443"},
		{name: "IPv6 default port", url: "http://[::1]", weight: 1, wantName: "http://[::1]", wantAddr: "[::1]:80"},
		{name: "IPv6 with port", url: "http://[::1]:9000", weight: 1, wantName: "http://[::1]:9000", wantAddr: "[::1]:9000"},
		{name: "path not part of identity", url: "http://10.0.0.3:80/api", weight: 2, wantName: "http://10.0.0.3:80", wantAddr: "10.0.0.3:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(mustParse(t, tt.url), tt.weight)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if b.Name != tt.wantName || b.String() != tt.wantName {
				t.Errorf("Name = %q, String() = %q, want %q", b.Name, b.String(), tt.wantName)
			}
			if b.Addr != tt.wantAddr {
				t.Errorf("Addr = %q, want %q", b.Addr, tt.wantAddr)
			}
			if b.Weight != tt.weight {
				t.Errorf("Weight = %d, want %d", b.Weight, tt.weight)
			}
			if !b.Healthy() {
				t.Error("a new backend is not healthy; it should start optimistic")
			}
			if b.InFlight() != 0 || b.Served() != 0 || b.Failures() != 0 {
				t.Errorf("new backend has counters %d/%d/%d, want zero", b.InFlight(), b.Served(), b.Failures())
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name    string
		url     *url.URL
		weight  int
		wantErr string
	}{
		{name: "nil url", url: nil, weight: 1, wantErr: "no host"},
		{name: "empty host", url: &url.URL{Scheme: "http"}, weight: 1, wantErr: "no host"},
		// url.Parse reads "localhost:8001" as scheme "localhost".
		{name: "no scheme", url: &url.URL{Scheme: "localhost", Opaque: "8001"}, weight: 1, wantErr: `"localhost:8001" has no host`},
		{name: "weight zero", url: &url.URL{Scheme: "http", Host: "a:80"}, weight: 0, wantErr: "weight 0 is below 1"},
		{name: "weight negative", url: &url.URL{Scheme: "http", Host: "a:80"}, weight: -2, wantErr: "weight -2 is below 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(tt.url, tt.weight)
			if err == nil {
				t.Fatalf("New succeeded with %+v", b)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not say %q", err, tt.wantErr)
			}
		})
	}
}

func TestSetHealthyReportsTransitions(t *testing.T) {
	b, err := New(mustParse(t, "http://a:80"), 1)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		set, wantChanged bool
	}{
		{set: true, wantChanged: false},
		{set: false, wantChanged: true},
		{set: false, wantChanged: false},
		{set: true, wantChanged: true},
		{set: true, wantChanged: false},
	}
	for i, s := range steps {
		if got := b.SetHealthy(s.set); got != s.wantChanged {
			t.Errorf("step %d: SetHealthy(%v) = %v, want %v", i, s.set, got, s.wantChanged)
		}
		if b.Healthy() != s.set {
			t.Errorf("step %d: Healthy() = %v after SetHealthy(%v)", i, b.Healthy(), s.set)
		}
	}
}

// Racing setters must see exactly one transition per real change: if eight
// goroutines all mark a healthy backend down, exactly one of them is told it
// changed, so the transition is logged and the snapshot rebuilt once.
func TestSetHealthyConcurrentSingleTransition(t *testing.T) {
	b, err := New(mustParse(t, "http://a:80"), 1)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	changed := make(chan bool, 8)
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			changed <- b.SetHealthy(false)
		})
	}
	close(start)
	wg.Wait()
	close(changed)
	n := 0
	for c := range changed {
		if c {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d goroutines saw the transition, want exactly 1", n)
	}
}

func TestAcquireReleaseConcurrent(t *testing.T) {
	const goroutines, each = 8, 1000
	b, err := New(mustParse(t, "http://a:80"), 1)
	if err != nil {
		t.Fatal(err)
	}
	var acquired, released sync.WaitGroup
	release := make(chan struct{})
	for range goroutines {
		acquired.Add(1)
		released.Go(func() {
			for range each {
				b.Acquire()
			}
			acquired.Done()
			<-release
			for range each {
				b.Release()
				b.Fail()
			}
		})
	}
	acquired.Wait()
	if got := b.InFlight(); got != goroutines*each {
		t.Errorf("InFlight = %d with every request acquired, want %d", got, goroutines*each)
	}
	close(release)
	released.Wait()
	if got := b.InFlight(); got != 0 {
		t.Errorf("InFlight = %d after every release, want 0", got)
	}
	if got := b.Served(); got != goroutines*each {
		t.Errorf("Served = %d, want %d", got, goroutines*each)
	}
	if got := b.Failures(); got != goroutines*each {
		t.Errorf("Failures = %d, want %d", got, goroutines*each)
	}
}
