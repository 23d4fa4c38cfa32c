package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/stats"
)

// api serves the JSON endpoints.
type api struct {
	o       Options
	metrics *metrics
}

// listing is one pool: GET /api/pools/{pool}/backends, and GET
// /api/backends for the default pool.
type listing struct {
	Pool      string `json:"pool"`
	Algorithm string `json:"algorithm"`
	// WeightsIgnored says the members' weights differ and the algorithm
	// gives each the same share anyway; Warnings says so in words.
	WeightsIgnored bool          `json:"weights_ignored"`
	Warnings       []string      `json:"warnings"`
	Generation     uint64        `json:"generation"`
	Processes      int           `json:"processes"`
	Queued         int64         `json:"queued"`
	Time           time.Time     `json:"time"`
	Totals         totals        `json:"totals"`
	Backends       []backendView `json:"backends"`
}

// counts is a stats.Counts as the API shows it.
type counts struct {
	Requests  uint64            `json:"requests"`
	Responses map[string]uint64 `json:"responses"`
	Latency   latency           `json:"latency"`
	BytesIn   uint64            `json:"bytes_in"`
	BytesOut  uint64            `json:"bytes_out"`
	// GRPC counts gRPC responses by grpc-status ("0" to "16", "other"),
	// the statuses never seen left out: {} when no gRPC response came.
	GRPC map[string]uint64 `json:"grpc"`
}

// latency is a histogram with cumulative counts, the last one +Inf.
type latency struct {
	Bounds     []float64 `json:"bounds"`
	Counts     []uint64  `json:"counts"`
	SumSeconds float64   `json:"sum_seconds"`
}

type totals struct {
	counts
	InFlight            int64  `json:"in_flight"`
	ConnectionsOpen     int64  `json:"connections_open"`
	ConnectionsAccepted uint64 `json:"connections_accepted"`
	Retries             uint64 `json:"retries"`
	RetryBudgetRefusals uint64 `json:"retry_budget_refusals"`
	// NoBackend counts requests relay answered itself (502, 503, 504,
	// refused bodies) or whose client left while queued.
	NoBackend uint64 `json:"no_backend"`
	// NoBackendGRPC counts, of those, the gRPC-shaped answers by
	// grpc-status, as GRPC does.
	NoBackendGRPC map[string]uint64 `json:"no_backend_grpc"`
}

type backendView struct {
	Name             string     `json:"name"`
	Source           string     `json:"source"`
	Key              string     `json:"key,omitempty"`
	Weight           int        `json:"weight"`
	ConfiguredWeight int        `json:"configured_weight"`
	InRotation       bool       `json:"in_rotation"`
	State            string     `json:"state"`
	Healthy          bool       `json:"healthy"`
	Breaker          string     `json:"breaker"`
	EjectedUntil     *time.Time `json:"ejected_until,omitempty"`
	Draining         bool       `json:"draining"`
	Drained          bool       `json:"drained"`
	Disabled         bool       `json:"disabled"`
	InFlight         int64      `json:"in_flight"`
	Attempts         uint64     `json:"attempts"`
	Failures         uint64     `json:"failures"`
	Ejections        uint64     `json:"ejections"`
	counts
}

func countsOf(c *stats.Counts) counts {
	out := counts{Requests: c.Total(), Responses: map[string]uint64{}, BytesIn: c.BytesIn, BytesOut: c.BytesOut}
	for k, n := range c.ByClass() {
		out.Responses[stats.Classes[k]] = n
	}
	out.GRPC = grpcOf(c)
	out.Latency = latency{Bounds: stats.Bounds[:], Counts: make([]uint64, stats.NumBuckets), SumSeconds: float64(c.LatencyNs) / 1e9}
	var cum uint64
	for i, n := range c.Latency {
		cum += n
		out.Latency.Counts[i] = cum
	}
	return out
}

// grpcOf is c's gRPC responses by grpc-status, the non-zero ones.
func grpcOf(c *stats.Counts) map[string]uint64 {
	out := map[string]uint64{}
	for i, n := range c.GRPC {
		if n > 0 {
			out[stats.GRPCCodes[i]] = n
		}
	}
	return out
}

// breakerState names a member's breaker.
func breakerState(m *control.MemberStatus) string {
	switch {
	case m.HalfOpen:
		return "half-open"
	case !m.State.EjectedUntil.IsZero():
		return "open"
	}
	return "closed"
}

// viewOf is a member as the API shows it, with its counters summed over
// the processes.
func viewOf(m *control.MemberStatus, st *stats.Backend) backendView {
	v := backendView{
		Name: m.URL, Source: m.Source(), Key: m.Key, Weight: m.State.EffectiveWeight, ConfiguredWeight: m.Weight,
		InRotation: m.State.Available() && !m.HalfOpen, Healthy: m.State.Healthy, Breaker: breakerState(m),
		Draining: m.State.Draining, Disabled: m.State.Disabled, Ejections: m.Ejections,
	}
	if !m.State.EjectedUntil.IsZero() {
		t := m.State.EjectedUntil
		v.EjectedUntil = &t
	}
	if st != nil {
		v.InFlight, v.Attempts, v.Failures = st.InFlight, st.Served, st.Failures
		v.counts = countsOf(&st.Requests)
	} else {
		v.counts = countsOf(&stats.Counts{})
	}
	v.Drained = v.Draining && v.InFlight == 0
	switch {
	case v.Disabled:
		v.State = "disabled"
	case v.Drained:
		v.State = "drained"
	case v.Draining:
		v.State = "draining"
	case !v.Healthy:
		v.State = "down"
	case v.Breaker != "closed":
		v.State = "ejected"
	default:
		v.State = "up"
	}
	return v
}

// status reads relay's status, waiting for the processes' counters for
// at most collectTimeout.
func (a *api) status(r *http.Request) *control.Status {
	ctx, cancel := context.WithTimeout(r.Context(), collectTimeout)
	defer cancel()
	return a.o.Control.Status(ctx)
}

// poolsListing is GET /api/pools: every pool, its members in it.
type poolsListing struct {
	Generation uint64    `json:"generation"`
	Processes  int       `json:"processes"`
	Time       time.Time `json:"time"`
	Pools      []listing `json:"pools"`
}

// memberKey names a member's counters: its pool and URL.
type memberKey struct{ pool, name string }

// byMember indexes s's backend counters by pool and name.
func byMember(s *control.Status) map[memberKey]*stats.Backend {
	out := make(map[memberKey]*stats.Backend, len(s.Stats.Backends))
	for i := range s.Stats.Backends {
		b := &s.Stats.Backends[i]
		out[memberKey{b.Pool, b.Name}] = b
	}
	return out
}

// listing is pool as the API shows it, or nil when relay has no such
// pool.
func (a *api) listing(s *control.Status, pool string) *listing {
	var algorithm string
	found := false
	for _, p := range s.Pools {
		if p.Name == pool {
			algorithm, found = p.Algorithm, true
		}
	}
	if !found {
		return nil
	}
	l := &listing{Pool: pool, Algorithm: algorithm, Generation: s.Generation, Processes: s.Processes, Time: s.Time, Backends: []backendView{}}
	counters := byMember(s)
	var sum, unanswered stats.Counts
	var weights []int
	for i := range s.Members {
		m := &s.Members[i]
		if m.Pool != pool {
			continue
		}
		st := counters[memberKey{pool, m.URL}]
		l.Backends = append(l.Backends, viewOf(m, st))
		weights = append(weights, m.Weight)
		if st != nil {
			sum.Add(&st.Requests)
			l.Totals.InFlight += st.InFlight
		}
	}
	for _, p := range s.Stats.Pools {
		if p.Name != pool {
			continue
		}
		l.Queued += p.Queued
		l.Totals.Retries += p.Retries
		l.Totals.RetryBudgetRefusals += p.BudgetRefusals
		l.Totals.NoBackend += p.Unanswered.Total()
		sum.Add(&p.Unanswered)
		unanswered.Add(&p.Unanswered)
	}
	l.Totals.counts = countsOf(&sum)
	l.Totals.NoBackendGRPC = grpcOf(&unanswered)
	l.Totals.ConnectionsOpen, l.Totals.ConnectionsAccepted = s.Stats.ConnsOpen, s.Stats.ConnsAccepted
	l.Warnings = []string{}
	if w := config.WeightsIgnored(l.Algorithm, weights, config.Options{IgnoringWeights: a.o.IgnoringWeights}); w != "" {
		l.WeightsIgnored, l.Warnings = true, append(l.Warnings, w)
	}
	return l
}

// pool is the pool a request names: {pool} on /api/pools/{pool}/...,
// the default pool on /api/backends.
func pool(r *http.Request) string {
	if p := r.PathValue("pool"); p != "" {
		return p
	}
	return control.DefaultPool
}

func (a *api) pools(w http.ResponseWriter, r *http.Request) {
	s := a.status(r)
	out := poolsListing{Generation: s.Generation, Processes: s.Processes, Time: s.Time, Pools: []listing{}}
	for _, p := range s.Pools {
		out.Pools = append(out.Pools, *a.listing(s, p.Name))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	l := a.listing(a.status(r), pool(r))
	if l == nil {
		_, err := a.o.Control.Find(pool(r), "")
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// one answers an action with the backend's view after it.
func (a *api) one(w http.ResponseWriter, r *http.Request, status int, name string) {
	if l := a.listing(a.status(r), pool(r)); l != nil {
		for _, b := range l.Backends {
			if b.Name == name {
				writeJSON(w, status, b)
				return
			}
		}
	}
	writeJSON(w, status, map[string]string{"pool": pool(r), "name": name, "state": "removed"})
}

func (a *api) act(w http.ResponseWriter, r *http.Request) {
	a.apply(w, r, r.PathValue("action"), nil)
}

// patch is PATCH /api/pools/{pool}/backends/{name}: {"weight": 3} sets
// the weight, {"state": "drain"} (or "enable", "disable") acts, both may
// be given.
func (a *api) patch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Weight *int   `json:"weight"`
		State  string `json:"state"`
	}
	err := readJSON(r, &body)
	if err == nil && body.Weight == nil && body.State == "" {
		err = errors.New(`the body must give a weight, a state or both: {"weight": 3}, {"state": "drain"}`)
	}
	if err == nil && body.State != "" && body.State != "drain" && body.State != "enable" && body.State != "disable" {
		err = errors.New("unknown state " + quote(body.State) + "; known: drain, enable, disable")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.apply(w, r, body.State, body.Weight)
}

// apply runs action (drain, enable, disable, weight; "" for none) and a
// weight change on the backend the request names.
func (a *api) apply(w http.ResponseWriter, r *http.Request, action string, weight *int) {
	p := pool(r)
	name, err := a.o.Control.Find(p, r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	ctl := a.o.Control
	switch action {
	case "":
	case "drain":
		err = ctl.Drain(p, name)
	case "enable":
		err = ctl.Enable(p, name)
	case "disable":
		err = ctl.Disable(p, name)
	case "weight":
		var body struct {
			Weight *int `json:"weight"`
		}
		if err = readJSON(r, &body); err == nil && body.Weight == nil {
			err = errors.New(`the body must give the weight: {"weight": 3}`)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		weight = body.Weight
	default:
		writeError(w, http.StatusNotFound, "unknown action "+quote(action)+"; known: drain, enable, disable, weight")
		return
	}
	if err == nil && weight != nil {
		err = ctl.SetWeight(p, name, *weight)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	a.one(w, r, http.StatusOK, name)
}

func (a *api) add(w http.ResponseWriter, r *http.Request) {
	var body struct {
		URL    string `json:"url"`
		Weight int    `json:"weight"`
	}
	if err := readJSON(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.URL == "" {
		writeError(w, http.StatusBadRequest, `the body must give the backend's url: {"url": "http://10.0.0.5:8080", "weight": 1}`)
		return
	}
	name, err := a.o.Control.Add(pool(r), body.URL, body.Weight)
	if err != nil {
		writeErr(w, err)
		return
	}
	a.one(w, r, http.StatusCreated, name)
}

func (a *api) remove(w http.ResponseWriter, r *http.Request) {
	p := pool(r)
	name, err := a.o.Control.Find(p, r.PathValue("name"))
	if err == nil {
		err = a.o.Control.Remove(p, name)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"pool": p, "name": name, "state": "removed"})
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is ready while some pool has a backend in rotation; the answer
// counts them, in all and by pool.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	byPool := a.o.Control.InRotation()
	n := 0
	for _, k := range byPool {
		n += k
	}
	if n == 0 {
		writeError(w, http.StatusServiceUnavailable, "no backend in rotation")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "in_rotation": n, "pools": byPool})
}

func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	gen, err := a.o.Reload()
	if err != nil {
		body := map[string]any{"error": "configuration refused; relay keeps serving the one it runs: " + err.Error()}
		var cerr *config.Errors
		if errors.As(err, &cerr) {
			var ps []string
			for _, p := range cerr.Problems {
				ps = append(ps, p.String())
			}
			body["problems"] = ps
		}
		writeJSON(w, http.StatusBadRequest, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "reloaded", "generation": gen})
}

// readJSON decodes a small JSON body into v, refusing unknown fields.
func readJSON(r *http.Request, v any) error {
	d := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("the request needs a JSON body")
		}
		return errors.New("the body is not the JSON expected: " + err.Error())
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	e.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// writeErr answers a Control error with the status its kind calls for.
func writeErr(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, control.ErrNoBackend), errors.Is(err, control.ErrNoPool):
		status = http.StatusNotFound
	case errors.Is(err, control.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, control.ErrConflict):
		status = http.StatusConflict
	}
	writeError(w, status, err.Error())
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
