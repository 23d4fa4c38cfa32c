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
		"Requests answered, by pool, the backend that answered (none: relay answered itself), method and status class.",
		"pool", "backend", "method", "code")
	descGRPC = desc("grpc_responses_total",
		"gRPC responses, by pool, the backend that answered (none: relay answered itself) and the grpc-status they ended with (0 to 16; other for anything else).",
		"pool", "backend", "grpc_status")
	descDuration = desc("request_duration_seconds",
		"Time from a request's head arriving to the end of its answer, by pool and backend.", "pool", "backend")
	descReceived = desc("received_body_bytes_total", "Request body bytes received from clients, by pool and backend.", "pool", "backend")
	descSent     = desc("sent_body_bytes_total", "Response body bytes sent to clients, by pool and backend.", "pool", "backend")
	descInFlight = desc("backend_in_flight_requests", "Requests forwarded to the backend and not yet done.", "pool", "backend")
	descAttempts = desc("backend_attempts_total", "Attempts sent to the backend, retries included.", "pool", "backend")
	descFailures = desc("backend_failures_total",
		"Attempts that failed: dial errors, timeouts, broken answers, statuses counted as failures.", "pool", "backend")
	descUp         = desc("backend_up", "1 when the backend passes its active health checks.", "pool", "backend")
	descInRotation = desc("backend_in_rotation",
		"1 when the backend may be picked: healthy, breaker closed, not drained or disabled.", "pool", "backend")
	descBreaker  = desc("backend_breaker_state", "1 for the state the backend's circuit breaker is in.", "pool", "backend", "state")
	descOperator = desc("backend_operator_state",
		"1 for each state an operator set (draining, disabled); 0 otherwise.", "pool", "backend", "state")
	descWeight        = desc("backend_weight", "The backend's weight now.", "pool", "backend")
	descEjections     = desc("backend_ejections_total", "Times the backend's circuit breaker opened.", "pool", "backend")
	descChecks        = desc("health_checks_total", "Active health checks, by pool, backend and result.", "pool", "backend", "result")
	descCheckTime     = desc("health_check_duration_seconds", "Time an active health check took, by pool and backend.", "pool", "backend")
	descQueued        = desc("queued_requests", "Requests waiting for a backend below its request cap.", "pool")
	descRetries       = desc("retries_total", "Attempts after a request's first, on another backend.", "pool")
	descRefusals      = desc("retry_budget_refusals_total", "Retries the retry budget refused.", "pool")
	descLimited       = desc("rate_limited_total", "Requests a rate limit refused with 429, by pool and route (\"\" when no route took them).", "pool", "route")
	descRouteRequests = desc("route_requests_total", "Requests each route took, by status class; a route that is gone keeps its count until relay restarts.", "route", "code")
	descEncoders      = desc("compress_encoders_in_use", "Response compression's encoders in use: responses being compressed now.")
	descOverBudget    = desc("compress_over_budget_total", "Responses sent uncompressed because the encoders in use held the process's encoder memory.")
	descSpans         = desc("trace_spans_total", "Sampled spans, by what became of them: exported, dropped (the queue was full) or failed (an export failed).", "result")
	descConnsOpen     = desc("client_connections_open", "Client connections open.")
	descAccepted      = desc("client_connections_accepted_total", "Client connections accepted.")
	descReloads       = desc("config_reloads_total", "Configuration reloads, by result.", "result")
	descGen           = desc("config_generation", "The configuration generation relay runs, from 1.")
	descProcesses     = desc("serving_processes", "Serving processes attached to the supervisor.")
	descCertExpiry    = desc("acme_certificate_expiry_timestamp_seconds", "When each certificate relay ordered expires, in Unix seconds, by its first name.", "name")
	descACMEOrders    = desc("acme_orders_total", "ACME orders begun, renewals included.")
	descACMEObtained  = desc("acme_certificates_obtained_total", "Certificates obtained from the ACME CA, renewals included.")
	descACMEFailures  = desc("acme_failures_total", "ACME orders that failed.")
	descBuild         = desc("build_info", "Always 1; the labels say which relay this is: its version, the Go that built it and the commit (relay -version).",
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
	// Every backend series is labelled by pool and backend: one address
	// in two pools is two members, each with its own series.
	requests := func(pool, name string, c *stats.Counts) {
		for mi, byClass := range c.Responses {
			for ci, n := range byClass {
				if n > 0 {
					counter(descRequests, n, pool, name, stats.Methods[mi], stats.Classes[ci])
				}
			}
		}
		for i, n := range c.GRPC {
			if n > 0 {
				counter(descGRPC, n, pool, name, stats.GRPCCodes[i])
			}
		}
		ch <- histogram(descDuration, c.Latency[:], c.LatencyNs, pool, name)
		counter(descReceived, c.BytesIn, pool, name)
		counter(descSent, c.BytesOut, pool, name)
	}

	counters := byMember(s)
	for i := range s.Members {
		ms := &s.Members[i]
		pool, name := ms.Pool, ms.URL
		st := counters[memberKey{pool, name}]
		if st == nil {
			st = &stats.Backend{Pool: pool, Name: name}
		}
		requests(pool, name, &st.Requests)
		gauge(descInFlight, float64(st.InFlight), pool, name)
		counter(descAttempts, st.Served, pool, name)
		counter(descFailures, st.Failures, pool, name)
		gauge(descUp, flag(ms.State.Healthy), pool, name)
		gauge(descInRotation, flag(ms.State.Available() && !ms.HalfOpen), pool, name)
		state := breakerState(ms)
		for _, b := range []string{"closed", "open", "half-open"} {
			gauge(descBreaker, flag(state == b), pool, name, b)
		}
		gauge(descOperator, flag(ms.State.Draining), pool, name, "draining")
		gauge(descOperator, flag(ms.State.Disabled), pool, name, "disabled")
		gauge(descWeight, float64(ms.State.EffectiveWeight), pool, name)
		// The breaker and the checks are the address's: each pool
		// holding it shows the same counts.
		counter(descEjections, ms.Ejections, pool, name)
		counter(descChecks, ms.Checks.Passed, pool, name, "pass")
		counter(descChecks, ms.Checks.Failed, pool, name, "fail")
		ch <- histogram(descCheckTime, ms.Checks.Latency[:], ms.Checks.LatencyNs, pool, name)
	}
	for _, p := range s.Stats.Pools {
		gauge(descQueued, float64(p.Queued), p.Name)
		counter(descRetries, p.Retries, p.Name)
		counter(descRefusals, p.BudgetRefusals, p.Name)
		requests(p.Name, "none", &p.Unanswered)
	}
	// What relay answered without a pool (404, redirects, refused
	// paths): pool "" and backend "none".
	requests("", "none", &s.Stats.NoPool)
	for _, r := range s.Stats.Routes {
		for ci, n := range r.Responses {
			if n > 0 {
				counter(descRouteRequests, n, r.Name, stats.Classes[ci])
			}
		}
	}
	for _, l := range s.Stats.Limited {
		counter(descLimited, l.Requests, l.Pool, l.Route)
	}
	gauge(descEncoders, float64(s.Stats.Compress.EncodersInUse))
	counter(descOverBudget, s.Stats.Compress.OverBudget)
	counter(descSpans, s.Stats.Spans.Exported, "exported")
	counter(descSpans, s.Stats.Spans.Dropped, "dropped")
	counter(descSpans, s.Stats.Spans.Failed, "failed")
	gauge(descConnsOpen, float64(s.Stats.ConnsOpen))
	counter(descAccepted, s.Stats.ConnsAccepted)
	counter(descReloads, s.Reloads[0], "success")
	counter(descReloads, s.Reloads[1], "failure")
	gauge(descGen, float64(s.Generation))
	gauge(descProcesses, float64(s.Processes))
	for _, c := range s.Certificates {
		gauge(descCertExpiry, float64(c.NotAfter.Unix()), c.Names[0])
	}
	if s.ACME != nil {
		counter(descACMEOrders, s.ACME.Orders)
		counter(descACMEObtained, s.ACME.Obtained)
		counter(descACMEFailures, s.ACME.Failures)
	}
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
