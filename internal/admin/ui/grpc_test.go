package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relay/internal/browser"
)

// grpcChips is what the gRPC line under the backend name of pool shows,
// one "CLASS NAME COUNT" per chip joined by " | "; null when the backend
// has no such line, and "misplaced" when it is not right under the
// backend's row.
func grpcChips(pool, name string) string {
	return fmt.Sprintf(`(() => {
		const line = document.querySelector('#backends tr.grpc-row[data-grpc-pool=%s][data-grpc-backend=%s]');
		if (!line) return null;
		const above = line.previousElementSibling;
		if (!above || above.dataset.pool !== line.dataset.grpcPool || above.dataset.backend !== line.dataset.grpcBackend) return "misplaced";
		return [...line.querySelectorAll(".gs")].map((c) => c.className.replace("gs ", "") + " " + c.textContent).join(" | ");
	})()`, js(pool), js(name))
}

// TestDashboardShowsGRPCStatuses: a backend that answered gRPC calls
// has a line under its row listing the statuses it answered by name,
// coloured by whose failure they are, and its pool's row what relay
// answered itself; backends without gRPC responses, in any pool, have no
// such line, and the table grows no wider. It leaves a picture to look
// at.
func TestDashboardShowsGRPCStatuses(t *testing.T) {
	f := newFake(time.Second)
	f.backends = append(f.backends[:2],
		&fakeBackend{pool: "rpc", name: "http://127.0.0.1:9101", weight: 1, configuredWeight: 1, state: "up", breaker: "closed", healthy: true,
			inFlight: 4, perPoll: constant(traffic{requests: 300, latency: [len(bounds) + 1]uint64{3: 300}, seconds: 0.9})},
		&fakeBackend{pool: "rpc", name: "http://127.0.0.1:9102", weight: 1, configuredWeight: 1, state: "ejected", breaker: "open", healthy: true,
			inFlight: 2, perPoll: constant(traffic{requests: 120, latency: [len(bounds) + 1]uint64{4: 120}, seconds: 0.8})},
		&fakeBackend{pool: "rpc", name: "http://127.0.0.1:9103", weight: 1, configuredWeight: 1, state: "down", breaker: "closed", perPoll: none})
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 2)

	lines := `document.querySelectorAll("#backends tr.grpc-row").length`
	if n, err := browser.Eval[int](b, lines); err != nil || n != 0 {
		t.Errorf("without gRPC traffic the table has %d gRPC lines (%v)", n, err)
	}

	f.update(func(f *fakeAPI) {
		f.member("rpc", "http://127.0.0.1:9101").grpc = map[string]uint64{"0": 123456, "5": 42, "3": 7}
		f.member("rpc", "http://127.0.0.1:9102").grpc = map[string]uint64{"0": 9000, "14": 3, "other": 1}
		f.ownGRPC = map[string]map[string]uint64{"rpc": {"14": 17, "8": 2}}
	})
	for _, c := range []struct{ pool, name, want string }{
		{"rpc", "http://127.0.0.1:9101", "g-ok OK 123,456 | g-warn INVALID_ARGUMENT 7 | g-warn NOT_FOUND 42"},
		{"rpc", "http://127.0.0.1:9102", "g-ok OK 9,000 | g-bad UNAVAILABLE 3 | g-warn other 1"},
	} {
		expr := grpcChips(c.pool, c.name)
		if err := b.WaitFor(5*time.Second, fmt.Sprintf("%s %s's gRPC line shows %q", c.pool, c.name, c.want), expr+" === "+js(c.want)); err != nil {
			got, _ := browser.Eval[*string](b, expr)
			if got != nil {
				err = fmt.Errorf("%v; it shows %q", err, *got)
			}
			t.Error(err)
		}
	}
	for _, m := range []struct{ pool, name string }{{"default", "http://127.0.0.1:8001"}, {"rpc", "http://127.0.0.1:9103"}} {
		if got, err := browser.Eval[*string](b, grpcChips(m.pool, m.name)); err != nil || got != nil {
			t.Errorf("%s %s, which answered no gRPC call, has a gRPC line %v (%v)", m.pool, m.name, got, err)
		}
	}
	if n, err := browser.Eval[int](b, lines); err != nil || n != 2 {
		t.Errorf("the table has %d gRPC lines (%v), want 2", n, err)
	}
	heads := `[...document.querySelectorAll("#backends tr.pool-head")].map((r) => r.textContent).join("\n")`
	want := "default round-robin · 2 of 2 in rotation\nrpc round-robin · 1 of 3 in rotationgRPC answered by relay:RESOURCE_EXHAUSTED 2UNAVAILABLE 17"
	if got, err := browser.Eval[string](b, heads); err != nil || got != want {
		t.Errorf("pool rows read %q (%v), want %q", got, err, want)
	}
	title, err := browser.Eval[string](b, `document.querySelector('#backends tr.grpc-row[data-grpc-backend="http://127.0.0.1:9101"] .gs[data-grpc-status="5"]').title`)
	if err != nil || title != "grpc-status 5 NOT_FOUND: 42 responses" {
		t.Errorf("NOT_FOUND's title %q (%v)", title, err)
	}
	if over, err := browser.Eval[int](b, `(() => {
		const w = document.querySelector(".table-wrap");
		return w.scrollWidth - w.clientWidth;
	})()`); err != nil || over > 0 {
		t.Errorf("with gRPC lines the backends table is %d pixels (%v) wider than its frame", over, err)
	}
	if err := b.Run(chromedp.ScrollIntoView(`#backends`)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, b, "dashboard-grpc.png")

	// The gRPC counts gone (a relay restarted without them): so are the lines.
	f.update(func(f *fakeAPI) {
		f.member("rpc", "http://127.0.0.1:9101").grpc = nil
		f.member("rpc", "http://127.0.0.1:9102").grpc = nil
		f.ownGRPC = nil
	})
	if err := b.WaitFor(5*time.Second, "no gRPC lines again", lines+` === 0`); err != nil {
		t.Error(err)
	}
	if got, _ := browser.Eval[string](b, heads); strings.Contains(got, "gRPC") {
		t.Errorf("pool rows still speak of gRPC: %q", got)
	}
	noErrors(t, b)
}
