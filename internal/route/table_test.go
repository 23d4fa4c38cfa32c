package route

import (
	"fmt"
	"testing"
	"time"
)

// A large ingress's table (one host and prefix per route, as
// bench/routes-config.sh writes) is built at start and at every reload,
// in every serving process: the host index must cost about the routes'
// number, not its square. 30,000 routes took about 13 s when every host
// looked at every route for the wildcards matching it, and take well
// under a second now; the bound leaves room for a slow, shared machine.
func TestNewLargeTableIsLinear(t *testing.T) {
	const n = 30000
	specs := make([]Spec, n)
	for i := range specs {
		specs[i] = Spec{Name: fmt.Sprint("r", i), Hosts: []string{fmt.Sprintf("svc%d.example.com", i)}, PathPrefix: fmt.Sprintf("/api%d", i)}
	}
	specs[n-1] = Spec{Name: "wild", Hosts: []string{"*.example.com"}}
	start := time.Now()
	tab := mustNew(t, specs, Reject)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("New with %d routes took %v", n, d)
	}
	var m Match
	for _, c := range []struct {
		host string
		want int
	}{{"svc7.example.com", 7}, {"other.example.com", n - 1}} {
		if ok, err := tab.Match(request("GET", "/api7/x", c.host), &m); err != nil || !ok || m.Route != c.want {
			t.Errorf("host %s: Match = %v %v, route %d; want %d", c.host, ok, err, m.Route, c.want)
		}
	}
}
