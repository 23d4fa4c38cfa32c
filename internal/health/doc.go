// Package health keeps backends that fail active checks out of rotation.
//
// A Checker probes every backend on a loop of its own, with an HTTP GET that
// must answer 2xx or with a bare TCP connect. Results pass through rise and
// fall thresholds, as in HAProxy's "inter 2s rise 2 fall 3": a healthy backend
// goes out after Fall failures in a row, an unhealthy one comes back after Rise
// passes in a row. The checker flips Backend's healthy flag and reports each
// transition to a callback; it never picks backends and knows nothing of the
// proxy, so the owner of the pool decides what a transition means (usually:
// build and publish the next snapshot).
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
// Cost: an HTTP probe is written straight on a new connection, without
// net/http (see http_probe.go), and probes start in groups (see spread.go).
// Checking 1,000 backends every 5 s costs relay about 1.6% of one core, most
// of it in the kernel's TCP code; scale_test.go measures it.
package health
