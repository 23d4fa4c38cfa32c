// Package health keeps backends that fail active checks out of rotation.
//
// A Checker probes every backend on a loop of its own, with an HTTP GET that
// must answer 2xx, with a bare TCP connect, or with the gRPC health
// protocol's grpc.health.v1.Health/Check over HTTP/2, which must answer
// SERVING (grpc_probe.go). Results pass through rise and
// fall thresholds, as in HAProxy's "inter 2s rise 2 fall 3": a healthy backend
// goes out after Fall failures in a row, an unhealthy one comes back after Rise
// passes in a row. The checker sets one of the Backend's conditions, failing
// active checks (SetHealthy), which pickers read at every pick, and reports
// each transition to a callback; it never picks backends, knows nothing of
// the proxy, and leaves the other conditions (ejection, drain) to their
// owners.
//
// Start-up: backends are created healthy. CheckAll probes them all once,
// before traffic is served, and takes each single result at its word: a
// backend that fails its first probe is out at once, one that passes stays in.
// Run then starts the loops.
//
// Timing: one backend's probes start on a fixed cadence of Interval (a ticker,
// not a pause after each probe), so a slow probe does not stretch the period,
// and a probe never overlaps the next one: when a probe outlasts the interval
// the missed tick is dropped. Hence a backend that starts failing is out of
// rotation within Fall×Interval + Timeout, and one that recovers is back within
// Rise×Interval plus the duration of its last, passing, probe. Each loop starts
// at a random one of a few evenly spaced times in [0, Interval), about one per
// 64 backends, so a thousand backends are probed in small groups spread over
// the interval instead of in one burst, and each group's probes share the
// scheduler wake-ups they cause (see spread.go).
//
// Targets: backends can be added and removed while the checker runs (Add,
// Remove, Set), told apart by Name. A backend added to a running checker is
// probed at once, that first result deciding alone as in CheckAll, and its
// loop then starts like Run's. A backend that stays keeps its run of passes
// and failures, even when a reload hands in a new Backend value of the same
// name, and that value takes on the verdict reached so far.
//
// Parsing: an HTTP probe reads its answer with relay's own strict HTTP/1.1
// engine (internal/h1), the one the data path uses, so a probe passes only
// what the proxy would accept (http_answer.go). A gRPC probe speaks HTTP/2
// with relay's own client (internal/h2up), the one calls to HTTP/2
// backends take, and reads the two tiny protobuf messages by hand
// (grpc_wire.go).
//
// Cost: an HTTP probe is written straight on a kept connection, without
// net/http (see http_probe.go), and probes start in groups (see spread.go).
// Checking 1,000 backends every 5 s costs relay about 0.85% of one core
// with kept connections and 2.1% with a new one per check, most of it in the
// kernel's TCP code; scale_test.go measures it.
package health
