package route

import (
	"fmt"
	"testing"

	"relay/internal/h1"
)

// ingress builds n routes as a large ingress has them: a host and a path
// prefix each (some services with two prefixes), a few wildcards, then a
// hostless catch-all.
func ingress(n int) []Spec {
	specs := make([]Spec, 0, n)
	for i := 0; len(specs) < n-1; i++ {
		host := fmt.Sprintf("svc%d.example.com", i)
		specs = append(specs, Spec{Hosts: []string{host}, PathPrefix: "/api", StripPrefix: true, Target: i})
		if i%3 == 0 && len(specs) < n-1 {
			specs = append(specs, Spec{Hosts: []string{host}, PathPrefix: "/static/", Target: i})
		}
		if i%100 == 0 && len(specs) < n-1 {
			specs = append(specs, Spec{Hosts: []string{fmt.Sprintf("*.zone%d.example.com", i)}, Target: i})
		}
	}
	return append(specs, Spec{Name: "default", Target: 0})
}

// benchRequests are what the benchmark and the allocation test route: a
// hit through the host index, a miss that falls to the catch-all, a
// wildcard and a path that needs normalising.
func benchRequests() []*h1.Request {
	return []*h1.Request{
		request("GET", "/api/v1/users/42?expand=true", "svc330.example.com:443", "Accept", "*/*"),
		request("GET", "/index.html", "unknown.example.org"),
		request("GET", "/x", "a.zone200.example.com"),
		request("POST", "/api//v1/./orders/../items?id=%41", "SVC3.example.com"),
	}
}

func TestMatchAllocates0(t *testing.T) {
	for _, n := range []int{1, 1000} {
		tab := mustNew(t, ingress(n), Reject)
		var m Match
		for _, req := range benchRequests() {
			tab.Match(req, &m) // grows m's buffers
			if a := testing.AllocsPerRun(200, func() { tab.Match(req, &m) }); a != 0 {
				t.Errorf("%d routes, %s %s: %v allocations per Match", n, req.Host, req.Target, a)
			}
		}
	}
}

func TestIngressRoutes(t *testing.T) {
	tab := mustNew(t, ingress(1000), Reject)
	var m Match
	want := []string{"330 /v1/users/42?expand=true", "0 /index.html", "200 /x", "3 /v1/items?id=%41"}
	for i, req := range benchRequests() {
		if ok, err := tab.Match(req, &m); !ok || err != nil {
			t.Fatalf("%s: %v %v", req.Target, ok, err)
		}
		if got := fmt.Sprint(tab.Spec(m.Route).Target, " ", string(m.Target())); got != want[i] {
			t.Errorf("%s %s: %s, want %s", req.Host, req.Target, got, want[i])
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			tab := mustNew(b, ingress(n), Reject)
			reqs := benchRequests()
			var m Match
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tab.Match(reqs[i%len(reqs)], &m)
			}
		})
	}
}

// BenchmarkMatchShapes routes each of benchRequests' shapes alone through
// 1,000 routes.
func BenchmarkMatchShapes(b *testing.B) {
	tab := mustNew(b, ingress(1000), Reject)
	names := []string{"host-hit-strip", "miss-catch-all", "wildcard", "normalise"}
	for i, req := range benchRequests() {
		b.Run(names[i], func(b *testing.B) {
			var m Match
			b.ReportAllocs()
			for j := 0; j < b.N; j++ {
				tab.Match(req, &m)
			}
		})
	}
}
