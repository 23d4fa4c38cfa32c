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

// listing is GET /api/backends.
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
	out.Latency = latency{Bounds: stats.Bounds[:], Counts: make([]uint64, stats.NumBuckets), SumSeconds: float64(c.LatencyNs) / 1e9}
	var cum uint64
	for i, n := range c.Latency {
		cum += n
		out.Latency.Counts[i] = cum
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

func (a *api) listing(s *control.Status) *listing {
	l := &listing{Pool: a.o.Pool, Algorithm: a.o.Algorithm(), Generation: s.Generation, Processes: s.Processes, Time: s.Time}
	byName := make(map[string]*stats.Backend, len(s.Stats.Backends))
	for i := range s.Stats.Backends {
		byName[s.Stats.Backends[i].Name] = &s.Stats.Backends[i]
	}
	var sum stats.Counts
	for i := range s.Members {
		st := byName[s.Members[i].URL]
		l.Backends = append(l.Backends, viewOf(&s.Members[i], st))
		if st != nil {
			sum.Add(&st.Requests)
			l.Totals.InFlight += st.InFlight
		}
	}
	for _, p := range s.Stats.Pools {
		l.Queued += p.Queued
		l.Totals.Retries += p.Retries
		l.Totals.RetryBudgetRefusals += p.BudgetRefusals
		l.Totals.NoBackend += p.Unanswered.Total()
		sum.Add(&p.Unanswered)
	}
	l.Totals.counts = countsOf(&sum)
	l.Totals.ConnectionsOpen, l.Totals.ConnectionsAccepted = s.Stats.ConnsOpen, s.Stats.ConnsAccepted
	l.Warnings = []string{}
	weights := make([]int, len(s.Members))
	for i, m := range s.Members {
		weights[i] = m.Weight
	}
	if w := config.WeightsIgnored(l.Algorithm, weights, config.Options{IgnoringWeights: a.o.IgnoringWeights}); w != "" {
		l.WeightsIgnored, l.Warnings = true, append(l.Warnings, w)
	}
	return l
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.listing(a.status(r)))
}

// one answers an action with the backend's view after it.
func (a *api) one(w http.ResponseWriter, r *http.Request, status int, name string) {
	l := a.listing(a.status(r))
	for _, b := range l.Backends {
		if b.Name == name {
			writeJSON(w, status, b)
			return
		}
	}
	writeJSON(w, status, map[string]string{"name": name, "state": "removed"})
}

func (a *api) act(w http.ResponseWriter, r *http.Request) {
	name, err := a.o.Control.Find(r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	ctl := a.o.Control
	switch action := r.PathValue("action"); action {
	case "drain":
		err = ctl.Drain(name)
	case "enable":
		err = ctl.Enable(name)
	case "disable":
		err = ctl.Disable(name)
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
		err = ctl.SetWeight(name, *body.Weight)
	default:
		writeError(w, http.StatusNotFound, "unknown action "+quote(action)+"; known: drain, enable, disable, weight")
		return
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
	name, err := a.o.Control.Add(body.URL, body.Weight)
	if err != nil {
		writeErr(w, err)
		return
	}
	a.one(w, r, http.StatusCreated, name)
}

func (a *api) remove(w http.ResponseWriter, r *http.Request) {
	name, err := a.o.Control.Find(r.PathValue("name"))
	if err == nil {
		err = a.o.Control.Remove(name)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "state": "removed"})
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	n := a.o.Control.InRotation()
	if n == 0 {
		writeError(w, http.StatusServiceUnavailable, "no backend in rotation")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "in_rotation": n})
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
	case errors.Is(err, control.ErrNoBackend):
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
