// Package stats holds relay's counters: what the request path and the
// health checks count, in atomics cheap enough to bump on every request,
// and the plain snapshots of them that cross the supervisor's channel, are
// summed over serving processes and end up in /metrics, the admin API and
// the dashboard.
//
// Counting never allocates and never locks: a request adds to a handful of
// atomics on its backend (one for its method and status class, one for its
// latency bucket, three for the latency sum and body bytes, and a gRPC
// response one for its grpc-status). Labels are bounded by construction:
// methods outside the common nine count as "other", statuses by class,
// grpc-status values outside gRPC's seventeen codes as "other", latencies
// in fixed buckets.
package stats

import (
	"sync/atomic"
	"time"
)

// Methods are the method labels requests are counted under; any other
// method counts as "other", so a client cannot grow the label set.
var Methods = [NumMethods]string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE", "other"}

// Classes are the status classes requests are counted under.
var Classes = [NumClasses]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

const (
	// NumMethods is the number of method labels, "other" included.
	NumMethods = 10
	// NumClasses is the number of status classes, 1xx to 5xx.
	NumClasses = 5
	// NumBuckets is the number of latency buckets, +Inf included.
	NumBuckets = len(Bounds) + 1
)

// Bounds are the upper bounds, in seconds, of the latency buckets: from half
// a millisecond (a proxied request on one machine) to ten seconds (a slow
// backend), about three to a decade, as Prometheus's own defaults are but
// reaching lower, where a proxy's latencies are.
var Bounds = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// boundsNs are Bounds in nanoseconds, for the request path's comparisons.
var boundsNs = func() (ns [len(Bounds)]int64) {
	for i, b := range Bounds {
		ns[i] = int64(b * 1e9)
	}
	return ns
}()

// MethodIndex is the index in Methods of a request method.
func MethodIndex(m []byte) int {
	switch string(m) { // no allocation: the conversion is only compared
	case "GET":
		return 0
	case "HEAD":
		return 1
	case "POST":
		return 2
	case "PUT":
		return 3
	case "DELETE":
		return 4
	case "PATCH":
		return 5
	case "OPTIONS":
		return 6
	case "CONNECT":
		return 7
	case "TRACE":
		return 8
	}
	return 9
}

// classIndex is the index in Classes of a status; anything outside
// 100-599 counts as 5xx, which relay never sends.
func classIndex(status int) int {
	if c := status/100 - 1; c >= 0 && c < NumClasses {
		return c
	}
	return NumClasses - 1
}

// bucket is the index of the latency bucket d falls in.
func bucket(d time.Duration) int {
	ns := int64(d)
	for i, b := range boundsNs {
		if ns <= b {
			return i
		}
	}
	return len(boundsNs)
}

// ByClass counts requests by the class of their status: the route
// counters, one atomic add per request. The zero value is ready.
type ByClass struct {
	n [NumClasses]atomic.Uint64
}

// Observe counts one request answered with status.
func (c *ByClass) Observe(status int) { c.n[classIndex(status)].Add(1) }

// Read returns the counts now.
func (c *ByClass) Read() (n [NumClasses]uint64) {
	for i := range c.n {
		n[i] = c.n[i].Load()
	}
	return n
}

// Requests counts answered requests by method and status class, their
// latency and their body bytes. The zero value is ready; it is safe for
// concurrent use.
type Requests struct {
	n         [NumMethods][NumClasses]atomic.Uint64
	latency   [NumBuckets]atomic.Uint64
	latencyNs atomic.Uint64
	in, out   atomic.Uint64
	grpc      [NumGRPC]atomic.Uint64 // gRPC responses by grpc-status (grpc.go)
}

// Observe counts one request: its method (an index in Methods, from
// MethodIndex), the status the client got, how long it took from its
// head's arrival to the end of its answer, and the body bytes received from
// the client and sent to it.
func (r *Requests) Observe(method, status int, d time.Duration, in, out int64) {
	r.n[method][classIndex(status)].Add(1)
	r.latency[bucket(d)].Add(1)
	r.latencyNs.Add(uint64(max(d, 0)))
	if in > 0 {
		r.in.Add(uint64(in))
	}
	if out > 0 {
		r.out.Add(uint64(out))
	}
}

// Read returns the counts now.
func (r *Requests) Read() Counts {
	var c Counts
	for m := range r.n {
		for k := range r.n[m] {
			c.Responses[m][k] = r.n[m][k].Load()
		}
	}
	for i := range r.latency {
		c.Latency[i] = r.latency[i].Load()
	}
	c.LatencyNs = r.latencyNs.Load()
	c.BytesIn, c.BytesOut = r.in.Load(), r.out.Load()
	for i := range r.grpc {
		c.GRPC[i] = r.grpc[i].Load()
	}
	return c
}

// Counts is a Requests read at one moment.
type Counts struct {
	// Responses counts requests by method (Methods) and status class
	// (Classes).
	Responses [NumMethods][NumClasses]uint64 `json:"responses"`
	// Latency counts requests by latency bucket (Bounds, then +Inf); the
	// counts are per bucket, not cumulative.
	Latency [NumBuckets]uint64 `json:"latency"`
	// LatencyNs is the sum of the latencies, in nanoseconds.
	LatencyNs uint64 `json:"latency_ns"`
	// BytesIn and BytesOut are body bytes from clients and to them.
	BytesIn  uint64 `json:"bytes_in"`
	BytesOut uint64 `json:"bytes_out"`
	// GRPC counts gRPC responses by the grpc-status they ended with
	// (GRPCCodes): a subset of the requests, those that were gRPC and
	// carried a status.
	GRPC [NumGRPC]uint64 `json:"grpc"`
}

// Add adds o to c.
func (c *Counts) Add(o *Counts) {
	for m := range c.Responses {
		for k := range c.Responses[m] {
			c.Responses[m][k] += o.Responses[m][k]
		}
	}
	for i := range c.Latency {
		c.Latency[i] += o.Latency[i]
	}
	c.LatencyNs += o.LatencyNs
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
	for i := range c.GRPC {
		c.GRPC[i] += o.GRPC[i]
	}
}

// Total is the number of requests counted.
func (c *Counts) Total() uint64 {
	var n uint64
	for _, b := range c.Latency {
		n += b
	}
	return n
}

// ByClass is the number of requests in each status class.
func (c *Counts) ByClass() (n [NumClasses]uint64) {
	for m := range c.Responses {
		for k, v := range c.Responses[m] {
			n[k] += v
		}
	}
	return n
}

// Checks counts one backend's active health checks: passes, failures and
// how long they took. The zero value is ready.
type Checks struct {
	pass, fail atomic.Uint64
	latency    [NumBuckets]atomic.Uint64
	latencyNs  atomic.Uint64
}

// Observe counts one check.
func (c *Checks) Observe(passed bool, d time.Duration) {
	if passed {
		c.pass.Add(1)
	} else {
		c.fail.Add(1)
	}
	c.latency[bucket(d)].Add(1)
	c.latencyNs.Add(uint64(max(d, 0)))
}

// CheckCounts is a Checks read at one moment.
type CheckCounts struct {
	Passed    uint64             `json:"passed"`
	Failed    uint64             `json:"failed"`
	Latency   [NumBuckets]uint64 `json:"latency"`
	LatencyNs uint64             `json:"latency_ns"`
}

// Read returns the counts now.
func (c *Checks) Read() CheckCounts {
	r := CheckCounts{Passed: c.pass.Load(), Failed: c.fail.Load(), LatencyNs: c.latencyNs.Load()}
	for i := range c.latency {
		r.Latency[i] = c.latency[i].Load()
	}
	return r
}
