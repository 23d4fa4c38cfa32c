package health

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"relay/internal/backend"
)

func TestTransitions(t *testing.T) {
	tests := []struct {
		name       string
		rise, fall int
		down       bool   // the backend starts unhealthy
		initial    bool   // the first result comes from CheckAll, the rest from the loop
		results    string // P pass, F fail, in probe order
		want       []bool // the transitions reported, in order
	}{
		{name: "passes keep a healthy backend in", rise: 2, fall: 3, results: "PPPP"},
		{name: "fall failures take it out", rise: 2, fall: 3, results: "FFF", want: []bool{false}},
		{name: "fewer than fall failures do not", rise: 2, fall: 3, results: "FF"},
		{name: "a pass resets the failure count", rise: 2, fall: 3, results: "FFPFFPFF"},
		{name: "out once however long it fails", rise: 2, fall: 3, results: "FFFFFFFF", want: []bool{false}},
		{name: "rise passes bring it back", rise: 2, fall: 3, results: "FFFPP", want: []bool{false, true}},
		{name: "a failure resets the pass count", rise: 2, fall: 3, results: "FFFPFPFP", want: []bool{false}},
		{name: "fall of one", rise: 1, fall: 1, results: "PF", want: []bool{false}},
		{name: "flapping with thresholds of one follows every result", rise: 1, fall: 1, results: "FPFPFP",
			want: []bool{false, true, false, true, false, true}},
		{name: "flapping below the thresholds reports nothing", rise: 2, fall: 2, results: "FPFPFPFP"},
		{name: "flapping that reaches the thresholds", rise: 2, fall: 2, results: "FFPFPPFPFF",
			want: []bool{false, true, false}},
		{name: "starting down it needs rise passes", rise: 3, fall: 2, down: true, results: "PPFPP"},
		{name: "starting down rise passes bring it in", rise: 3, fall: 2, down: true, results: "PPP", want: []bool{true}},
		{name: "starting down failures report nothing", rise: 2, fall: 2, down: true, results: "FFFF"},
		{name: "start-up check takes a failing backend out at once", rise: 2, fall: 3, initial: true, results: "F",
			want: []bool{false}},
		{name: "start-up check keeps a passing backend", rise: 2, fall: 3, initial: true, results: "PFF"},
		{name: "start-up check brings a passing down backend in at once", rise: 3, fall: 3, down: true, initial: true,
			results: "P", want: []bool{true}},
		{name: "after a failed start-up check rise passes bring it in", rise: 2, fall: 3, initial: true, results: "FPP",
			want: []bool{false, true}},
		{name: "after a failed start-up check one pass is not enough", rise: 2, fall: 3, initial: true, results: "FPFP",
			want: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, "http://127.0.0.1:8001")
			b.SetHealthy(!tt.down)
			var tr transitions
			var logs logRecords
			clk := newFakeClock(1, true)
			sc := newScript(tt.results)
			cfg := Config{Interval: time.Second, Timeout: time.Second, Rise: tt.rise, Fall: tt.fall}
			c, err := New(cfg, []*backend.Backend{b}, tr.onChange,
				WithClock(clk), WithProbe(sc.probe), WithRand(zeroRand), WithLogger(slog.New(&logs)))
			if err != nil {
				t.Fatal(err)
			}
			first := 0
			if tt.initial {
				c.CheckAll(context.Background())
				sc.waitCall(t, 0)
				first = 1
			}
			c.Run(context.Background())
			tk := <-clk.tickers
			if tk.every != cfg.Interval {
				t.Errorf("ticker period %v, want %v", tk.every, cfg.Interval)
			}
			for i := first; i < len(tt.results); i++ {
				sc.waitCall(t, i)
				tk.tick(t)
			}
			// The next call blocks until Stop; once it is made, every scripted
			// result has been recorded.
			sc.waitCall(t, len(tt.results))
			c.Stop()

			got := tr.list()
			if !slices.Equal(got, tt.want) {
				t.Errorf("transitions %v, want %v", got, tt.want)
			}
			wantHealthy := !tt.down
			if len(tt.want) > 0 {
				wantHealthy = tt.want[len(tt.want)-1]
			}
			if b.Healthy() != wantHealthy {
				t.Errorf("Healthy() = %v, want %v", b.Healthy(), wantHealthy)
			}
			records := logs.all()
			if len(records) != len(tt.want) {
				t.Errorf("%d log records, want one per transition (%d)", len(records), len(tt.want))
			}
			for i, r := range records {
				a := attrs(r)
				if a["backend"] != b.Name || a["reason"] == "" {
					t.Errorf("log record %d %q lacks backend or reason: %v", i, r.Message, a)
				}
				if i < len(tt.want) && a["healthy"] != map[bool]string{true: "true", false: "false"}[tt.want[i]] {
					t.Errorf("log record %d says healthy=%s, want %v", i, a["healthy"], tt.want[i])
				}
				if i < len(tt.want) && !tt.want[i] && a["reason"] != errProbe.Error() {
					t.Errorf("down record reason %q, want the probe error %q", a["reason"], errProbe)
				}
			}
			select {
			case <-tk.stopped:
			default:
				t.Error("ticker not stopped after Stop")
			}
		})
	}
}
