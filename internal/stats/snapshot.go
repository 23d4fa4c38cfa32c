package stats

import "sort"

// Process is what one serving process counted, as of one moment. Counters
// only grow while the process lives; gauges (in flight, queued, open
// connections) are its values at that moment.
type Process struct {
	// Backends are the process's counts by pool and backend name.
	Backends []Backend `json:"backends"`
	// Pools are the process's counts by pool name.
	Pools []Pool `json:"pools"`
	// Routes are the process's counts by route name: every route relay
	// has run since it started, so a reload that renames one does not
	// make a counter go back.
	Routes []Route `json:"routes,omitempty"`
	// Limited are the requests rate limits refused (429), by pool and
	// route ("" when no route took them).
	Limited []Limited `json:"limited,omitempty"`
	// NoPool counts the requests relay answered without a pool: no route
	// and no default pool (404), redirects, paths refused (400).
	NoPool Counts `json:"no_pool"`
	// ConnsOpen is the client connections open; ConnsAccepted the ones
	// ever accepted.
	ConnsOpen     int64  `json:"conns_open"`
	ConnsAccepted uint64 `json:"conns_accepted"`
	// Spans are what tracing's exporter did with the sampled spans.
	Spans Spans `json:"spans"`
	// Compress is what response compression's encoders are doing.
	Compress Compress `json:"compress"`
}

// Compress counts response compression's encoders: those in use now (a
// gauge), and the responses sent uncompressed because the encoders in
// use held the process's encoder memory.
type Compress struct {
	EncodersInUse int64  `json:"encoders_in_use"`
	OverBudget    uint64 `json:"over_budget"`
}

// Spans counts sampled spans: sent to the collector, dropped before
// sending (the queue full), and lost in exports that failed.
type Spans struct {
	Exported uint64 `json:"exported"`
	Dropped  uint64 `json:"dropped"`
	Failed   uint64 `json:"failed"`
}

// Backend is one member's counts in one process, or summed over several:
// a backend in one pool (an address in two pools counts in each).
type Backend struct {
	Pool string `json:"pool"`
	Name string `json:"name"`
	// InFlight is the requests forwarded to the backend and not yet done.
	InFlight int64 `json:"in_flight"`
	// Served counts attempts sent to it, retries included; Failures the
	// attempts that failed (dial errors, timeouts, broken or failing
	// answers).
	Served   uint64 `json:"served"`
	Failures uint64 `json:"failures"`
	// Requests counts the requests it answered, by method and status.
	Requests Counts `json:"requests"`
}

// Pool is one pool's counts in one process, or summed over several.
type Pool struct {
	Name string `json:"name"`
	// Queued is the requests waiting for a backend below its cap.
	Queued int64 `json:"queued"`
	// Retries counts attempts after a request's first; BudgetRefusals the
	// retries the retry budget refused.
	Retries        uint64 `json:"retries"`
	BudgetRefusals uint64 `json:"budget_refusals"`
	// Unanswered counts the requests no backend answered: relay's own 502,
	// 503 and 504, bodies refused, clients that left while queued.
	Unanswered Counts `json:"unanswered"`
}

// Route is one route's counts in one process, or summed over several:
// the requests it took, by the class of the status they got.
type Route struct {
	Name      string             `json:"name"`
	Responses [NumClasses]uint64 `json:"responses"`
}

// Limited is the count of requests a rate limit refused, of one pool and
// route.
type Limited struct {
	Pool     string `json:"pool"`
	Route    string `json:"route"`
	Requests uint64 `json:"requests"`
}

// Add adds o's counters and gauges to p, matching backends by pool and
// name and pools by name; ones p lacks are appended.
func (p *Process) Add(o *Process) {
	p.NoPool.Add(&o.NoPool)
	p.Spans.Exported += o.Spans.Exported
	p.Spans.Dropped += o.Spans.Dropped
	p.Spans.Failed += o.Spans.Failed
	p.Compress.EncodersInUse += o.Compress.EncodersInUse
	p.Compress.OverBudget += o.Compress.OverBudget
	p.ConnsOpen += o.ConnsOpen
	p.ConnsAccepted += o.ConnsAccepted
	type key struct{ pool, name string }
	at := make(map[key]int, len(p.Backends))
	for i, b := range p.Backends {
		at[key{b.Pool, b.Name}] = i
	}
	for i := range o.Backends {
		ob := &o.Backends[i]
		k, ok := at[key{ob.Pool, ob.Name}]
		if !ok {
			k = len(p.Backends)
			at[key{ob.Pool, ob.Name}] = k
			p.Backends = append(p.Backends, Backend{Pool: ob.Pool, Name: ob.Name})
		}
		b := &p.Backends[k]
		b.InFlight += ob.InFlight
		b.Served += ob.Served
		b.Failures += ob.Failures
		b.Requests.Add(&ob.Requests)
	}
	for i := range o.Pools {
		op := &o.Pools[i]
		q := p.pool(op.Name)
		q.Queued += op.Queued
		q.Retries += op.Retries
		q.BudgetRefusals += op.BudgetRefusals
		q.Unanswered.Add(&op.Unanswered)
	}
	for _, ol := range o.Limited {
		found := false
		for i := range p.Limited {
			if l := &p.Limited[i]; l.Pool == ol.Pool && l.Route == ol.Route {
				l.Requests += ol.Requests
				found = true
				break
			}
		}
		if !found {
			p.Limited = append(p.Limited, ol)
		}
	}
	for i := range o.Routes {
		or := &o.Routes[i]
		r := p.route(or.Name)
		for c, n := range or.Responses {
			r.Responses[c] += n
		}
	}
}

// route returns p's entry for the route name, appending it when missing.
func (p *Process) route(name string) *Route {
	for i := range p.Routes {
		if p.Routes[i].Name == name {
			return &p.Routes[i]
		}
	}
	p.Routes = append(p.Routes, Route{Name: name})
	return &p.Routes[len(p.Routes)-1]
}

// pool returns p's entry for name, appending it when missing.
func (p *Process) pool(name string) *Pool {
	for i := range p.Pools {
		if p.Pools[i].Name == name {
			return &p.Pools[i]
		}
	}
	p.Pools = append(p.Pools, Pool{Name: name})
	return &p.Pools[len(p.Pools)-1]
}

// Retire turns p into what stays of an exited process: its counters, not
// its gauges, which ended with it.
func (p *Process) Retire() {
	p.ConnsOpen = 0
	for i := range p.Backends {
		p.Backends[i].InFlight = 0
	}
	for i := range p.Pools {
		p.Pools[i].Queued = 0
	}
}

// Sort orders backends by pool and name and pools by name, so sums read
// the same however the processes reported.
func (p *Process) Sort() {
	sort.Slice(p.Backends, func(i, j int) bool {
		a, b := &p.Backends[i], &p.Backends[j]
		return a.Pool < b.Pool || a.Pool == b.Pool && a.Name < b.Name
	})
	sort.Slice(p.Pools, func(i, j int) bool { return p.Pools[i].Name < p.Pools[j].Name })
	sort.Slice(p.Routes, func(i, j int) bool { return p.Routes[i].Name < p.Routes[j].Name })
	sort.Slice(p.Limited, func(i, j int) bool {
		a, b := &p.Limited[i], &p.Limited[j]
		return a.Pool < b.Pool || a.Pool == b.Pool && a.Route < b.Route
	})
}
