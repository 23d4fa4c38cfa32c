package admin

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"relay/internal/stats"
	"relay/internal/version"
)

// metrics exposes relay's counters in the Prometheus text format. Every
// scrape collects the counters of every serving process at that moment
// (control.Control.Stats) and reports relay as one: counters summed
// over the processes, gauges summed (in flight, queued, connections) or
// as the control holds them (health, breakers, which are relay-wide).
type metrics struct {
	o   Options
	reg *prometheus.Registry
}

func newMetrics(o Options) *metrics {
	m := &metrics{o: o, reg: prometheus.NewRegistry()}
	m.reg.MustRegister(m,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("relay_"+name, help, labels, nil)
}

var (
	descRequests = desc("requests_total",
		"Requests answered, by the backend that answered (none: relay answered itself), method and status class.",
		"backend", "method", "code")
	descDuration = desc("request_duration_seconds",
		"Time from a request's head arriving to the end of its answer, by backend.", "backend")
	descReceived = desc("received_body_bytes_total", "Request body bytes received from clients, by backend.", "backend")
	descSent     = desc("sent_body_bytes_total", "Response body bytes sent to clients, by backend.", "backend")
	descInFlight = desc("backend_in_flight_requests", "Requests forwarded to the backend and not yet done.", "backend")
	descAttempts = desc("backend_attempts_total", "Attempts sent to the backend, retries included.", "backend")
	descFailures = desc("backend_failures_total",
		"Attempts that failed: dial errors, timeouts, broken answers, statuses counted as failures.", "backend")
	descUp         = desc("backend_up", "1 when the backend passes its active health checks.", "backend")
	descInRotation = desc("backend_in_rotation",
		"1 when the backend may be picked: healthy, breaker closed, not drained or disabled.", "backend")
	descBreaker  = desc("backend_breaker_state", "1 for the state the backend's circuit breaker is in.", "backend", "state")
	descOperator = desc("backend_operator_state",
		"1 for each state an operator set (draining, disabled); 0 otherwise.", "backend", "state")
	descWeight    = desc("backend_weight", "The backend's weight now.", "backend")
	descEjections = desc("backend_ejections_total", "Times the backend's circuit breaker opened.", "backend")
	descChecks    = desc("health_checks_total", "Active health checks, by backend and result.", "backend", "result")
	descCheckTime = desc("health_check_duration_seconds", "Time an active health check took, by backend.", "backend")
	descQueued    = desc("queued_requests", "Requests waiting for a backend below its request cap.", "pool")
	descRetries   = desc("retries_total", "Attempts after a request's first, on another backend.", "pool")
	descRefusals  = desc("retry_budget_refusals_total", "Retries the retry budget refused.", "pool")
	descConnsOpen = desc("client_connections_open", "Client connections open.")
	descAccepted  = desc("client_connections_accepted_total", "Client connections accepted.")
	descReloads   = desc("config_reloads_total", "Configuration reloads, by result.", "result")
	descGen       = desc("config_generation", "The configuration generation relay runs, from 1.")
	descProcesses = desc("serving_processes", "Serving processes attached to the supervisor.")
	descBuild     = desc("build_info", "Always 1; the labels say which relay this is: its version, the Go that built it and the commit (relay -version).",
		"version", "goversion", "revision")
)

// buildLabels are the build_info labels: the version and commit as relay
// -version prints them (package version), and the Go that built relay.
var buildLabels = func() [3]string {
	v := version.Get()
	return [3]string{v.Version, v.Go, v.Commit}
}()

// Describe sends nothing: the backends, and with them the series, change
// at runtime, so relay's collector is unchecked.
func (m *metrics) Describe(chan<- *prometheus.Desc) {}

// Collect reads relay's status and sends every series.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	s := m.o.Control.Status(ctx)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	requests := func(name string, c *stats.Counts) {
		for mi, byClass := range c.Responses {
			for ci, n := range byClass {
				if n > 0 {
					counter(descRequests, n, name, stats.Methods[mi], stats.Classes[ci])
				}
			}
		}
		ch <- histogram(descDuration, c.Latency[:], c.LatencyNs, name)
		counter(descReceived, c.BytesIn, name)
		counter(descSent, c.BytesOut, name)
	}

	byName := make(map[string]*stats.Backend, len(s.Stats.Backends))
	for i := range s.Stats.Backends {
		byName[s.Stats.Backends[i].Name] = &s.Stats.Backends[i]
	}
	for i := range s.Members {
		ms := &s.Members[i]
		name := ms.URL
		st := byName[name]
		if st == nil {
			st = &stats.Backend{Name: name}
		}
		requests(name, &st.Requests)
		gauge(descInFlight, float64(st.InFlight), name)
		counter(descAttempts, st.Served, name)
		counter(descFailures, st.Failures, name)
		gauge(descUp, flag(ms.State.Healthy), name)
		gauge(descInRotation, flag(ms.State.Available() && !ms.HalfOpen), name)
		state := breakerState(ms)
		for _, b := range []string{"closed", "open", "half-open"} {
			gauge(descBreaker, flag(state == b), name, b)
		}
		gauge(descOperator, flag(ms.State.Draining), name, "draining")
		gauge(descOperator, flag(ms.State.Disabled), name, "disabled")
		gauge(descWeight, float64(ms.State.EffectiveWeight), name)
		counter(descEjections, ms.Ejections, name)
		counter(descChecks, ms.Checks.Passed, name, "pass")
		counter(descChecks, ms.Checks.Failed, name, "fail")
		ch <- histogram(descCheckTime, ms.Checks.Latency[:], ms.Checks.LatencyNs, name)
	}
	var none stats.Counts
	for _, p := range s.Stats.Pools {
		none.Add(&p.Unanswered)
		gauge(descQueued, float64(p.Queued), p.Name)
		counter(descRetries, p.Retries, p.Name)
		counter(descRefusals, p.BudgetRefusals, p.Name)
	}
	requests("none", &none)
	gauge(descConnsOpen, float64(s.Stats.ConnsOpen))
	counter(descAccepted, s.Stats.ConnsAccepted)
	counter(descReloads, s.Reloads[0], "success")
	counter(descReloads, s.Reloads[1], "failure")
	gauge(descGen, float64(s.Generation))
	gauge(descProcesses, float64(s.Processes))
	gauge(descBuild, 1, buildLabels[:]...)
}

// histogram turns per-bucket counts (stats.Bounds, then +Inf) and a sum in
// nanoseconds into a Prometheus histogram in seconds.
func histogram(d *prometheus.Desc, perBucket []uint64, sumNs uint64, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(stats.Bounds))
	var cum uint64
	for i, b := range stats.Bounds {
		cum += perBucket[i]
		buckets[b] = cum
	}
	cum += perBucket[len(stats.Bounds)]
	return prometheus.MustNewConstHistogram(d, cum, float64(sumNs)/1e9, buckets, labels...)
}
