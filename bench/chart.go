//go:build ignore

// Command chart draws the medians written by bench/compare.sh as an SVG with
// two panels side by side: throughput and p99 latency, each against the
// number of concurrent connections, one line per balancer.
//
//	go run bench/chart.go -in /tmp/relay-bench.XXXXXX/medians.tsv -out bench/results.svg
//
// It reads the columns peer, conns, rps and p99_ms by name, so extra columns
// and their order do not matter. Only the standard library is used.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	in := flag.String("in", "", "medians `file` written by compare.sh (medians.tsv)")
	out := flag.String("out", "bench/results.svg", "SVG `file` to write")
	title := flag.String("title", "relay, nginx and HAProxy on one machine", "chart title")
	subtitle := flag.String("subtitle", "", "line under the title, for example the machine and the number of rounds")
	skip := flag.String("skip", "", "comma-separated `peers` to leave out, for example direct")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "chart: -in is required")
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out, *title, *subtitle, strings.Split(*skip, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(in, out, title, subtitle string, skip []string) error {
	f, err := os.Open(in)
	if err != nil {
		return fmt.Errorf("open medians: %w", err)
	}
	defer f.Close()
	series, err := readSeries(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", in, err)
	}
	series = without(series, skip)
	if len(series) == 0 {
		return errors.New("every peer was skipped")
	}
	var b strings.Builder
	draw(&b, series, title, subtitle)
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// point is one measured concurrency of one balancer.
type point struct {
	conns float64
	rps   float64 // NaN when the run produced no figure
	p99ms float64 // NaN when the run produced no figure
}

// series is the line of one balancer, its points sorted by concurrency.
type series struct {
	name   string
	points []point
}

// readSeries parses a tab-separated table with a header row into one series
// per value of the peer column, in the order the peers first appear.
func readSeries(r io.Reader) ([]series, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("empty file")
	}
	col := map[string]int{}
	for i, h := range strings.Split(sc.Text(), "\t") {
		col[strings.TrimSpace(h)] = i
	}
	for _, want := range []string{"peer", "conns", "rps", "p99_ms"} {
		if _, ok := col[want]; !ok {
			return nil, fmt.Errorf("no %q column in the header", want)
		}
	}
	byName := map[string]int{}
	var all []series
	for line := 2; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		fields := strings.Split(sc.Text(), "\t")
		get := func(name string) string {
			if i := col[name]; i < len(fields) {
				return strings.TrimSpace(fields[i])
			}
			return ""
		}
		conns, err := strconv.ParseFloat(get("conns"), 64)
		if err != nil || conns <= 0 {
			return nil, fmt.Errorf("line %d: conns %q is not a positive number", line, get("conns"))
		}
		name := get("peer")
		i, ok := byName[name]
		if !ok {
			i = len(all)
			byName[name] = i
			all = append(all, series{name: name})
		}
		all[i].points = append(all[i].points, point{conns: conns, rps: number(get("rps")), p99ms: number(get("p99_ms"))})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, errors.New("no rows under the header")
	}
	for _, s := range all {
		sort.Slice(s.points, func(a, b int) bool { return s.points[a].conns < s.points[b].conns })
	}
	return all, nil
}

// without drops the series whose names are listed.
func without(all []series, names []string) []series {
	var kept []series
	for _, s := range all {
		drop := false
		for _, n := range names {
			if strings.TrimSpace(n) == s.name {
				drop = true
			}
		}
		if !drop {
			kept = append(kept, s)
		}
	}
	return kept
}

// number parses a figure; "NA", empty and negative values become NaN, which
// the drawing skips.
func number(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

// style is how one balancer's line looks.
type style struct {
	color  string
	dashed bool
}

// knownStyles keeps each balancer's colour the same from chart to chart;
// relay gets the strongest colour, the direct ceiling a dashed grey.
var knownStyles = map[string]style{
	"relay":     {color: "#d7263d"},
	"relay+log": {color: "#f49d37", dashed: true},
	"nginx":     {color: "#1b998b"},
	"haproxy":   {color: "#2e5eaa"},
	"direct":    {color: "#8a8a8a", dashed: true},
}

// spareColors go to balancers without a known style, in order.
var spareColors = []string{"#7b2d8b", "#c2a200", "#3c8d2f", "#a0522d", "#17becf"}

func styles(all []series) []style {
	out := make([]style, len(all))
	spare := 0
	for i, s := range all {
		if st, ok := knownStyles[s.name]; ok {
			out[i] = st
			continue
		}
		out[i] = style{color: spareColors[spare%len(spareColors)]}
		spare++
	}
	return out
}

// Layout of the whole picture, in SVG user units (pixels).
const (
	width       = 1040
	height      = 500
	plotTop     = 130
	plotBottom  = 428
	leftMargin  = 78
	panelGap    = 96
	rightMargin = 28
	plotWidth   = (width - leftMargin - panelGap - rightMargin) / 2
	fontFamily  = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
)

// panel is one plot: which figure it shows and how its axis is labelled.
type panel struct {
	title  string
	yLabel string
	value  func(point) float64
	format func(v, step float64) string
}

func draw(w io.Writer, all []series, title, subtitle string) {
	st := styles(all)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n",
		width, height, width, height, fontFamily)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%d" y="30" font-size="20" font-weight="600" fill="#222">%s</text>`+"\n", leftMargin, esc(title))
	if subtitle != "" {
		fmt.Fprintf(w, `<text x="%d" y="52" font-size="13" fill="#555">%s</text>`+"\n", leftMargin, esc(subtitle))
	}
	drawLegend(w, all, st)

	xs := xScaleFor(all)
	panels := []panel{
		{title: "Throughput", yLabel: "requests per second", value: func(p point) float64 { return p.rps }, format: formatCount},
		{title: "p99 latency", yLabel: "milliseconds", value: func(p point) float64 { return p.p99ms }, format: formatPlain},
	}
	for i, p := range panels {
		left := float64(leftMargin + i*(plotWidth+panelGap))
		drawPanel(w, p, all, st, xs, left)
	}
	fmt.Fprintln(w, "</svg>")
}

// drawLegend puts one entry per balancer in a row under the title.
func drawLegend(w io.Writer, all []series, st []style) {
	x := float64(leftMargin)
	y := 74.0
	for i, s := range all {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>`+"\n",
			x, y, x+26, y, st[i].color, dash(st[i]))
		fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="#fff" stroke-width="1"/>`+"\n", x+13, y, st[i].color)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="13" fill="#222">%s</text>`+"\n", x+33, y+4.5, esc(s.name))
		// Text width is not known in SVG without a renderer; seven and a
		// half units per character is close for this font size.
		x += 33 + 7.5*float64(len(s.name)) + 26
	}
}

func drawPanel(w io.Writer, p panel, all []series, st []style, xs xScale, left float64) {
	right := left + plotWidth
	maxY := 0.0
	for _, s := range all {
		for _, pt := range s.points {
			if v := p.value(pt); !math.IsNaN(v) && v > maxY {
				maxY = v
			}
		}
	}
	step, top := niceAxis(maxY)
	y := func(v float64) float64 { return plotBottom - (plotBottom-plotTop)*v/top }
	x := func(c float64) float64 { return left + plotWidth*xs.frac(c) }

	fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="15" font-weight="600" fill="#222">%s</text>`+"\n", left, plotTop-16, esc(p.title))

	// Horizontal grid and y ticks.
	for v := 0.0; v <= top+step/2; v += step {
		yy := y(v)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e6e6e6" stroke-width="1"/>`+"\n", left, yy, right, yy)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="12" fill="#444" text-anchor="end">%s</text>`+"\n", left-8, yy+4, p.format(v, step))
	}
	// Vertical ticks at every measured concurrency.
	for _, c := range xs.ticks {
		xx := x(c)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#444" stroke-width="1"/>`+"\n", xx, plotBottom, xx, plotBottom+5)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="12" fill="#444" text-anchor="middle">%s</text>`+"\n", xx, plotBottom+19, formatPlain(c, 1))
	}
	// Axes.
	fmt.Fprintf(w, `<path d="M%.1f %d V%d H%.1f" fill="none" stroke="#444" stroke-width="1"/>`+"\n", left, plotTop, plotBottom, right)
	fmt.Fprintf(w, `<text x="%.1f" y="%d" font-size="13" fill="#333" text-anchor="middle">concurrent connections%s</text>`+"\n",
		left+plotWidth/2, plotBottom+40, xs.note)
	fmt.Fprintf(w, `<text transform="translate(%.1f %.1f) rotate(-90)" font-size="13" fill="#333" text-anchor="middle">%s</text>`+"\n",
		left-56, float64(plotTop+plotBottom)/2, esc(p.yLabel))

	// One line per balancer; a missing figure breaks the line.
	for i, s := range all {
		var path strings.Builder
		pen := false
		for _, pt := range s.points {
			v := p.value(pt)
			if math.IsNaN(v) {
				pen = false
				continue
			}
			cmd := "L"
			if !pen {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, x(pt.conns), y(v))
			pen = true
		}
		if path.Len() == 0 {
			continue
		}
		fmt.Fprintf(w, `<path d="%s" fill="none" stroke="%s" stroke-width="2.5" stroke-linejoin="round"%s><title>%s</title></path>`+"\n",
			strings.TrimSpace(path.String()), st[i].color, dash(st[i]), esc(s.name))
		for _, pt := range s.points {
			if v := p.value(pt); !math.IsNaN(v) {
				fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="#fff" stroke-width="1"><title>%s, %s connections: %s</title></circle>`+"\n",
					x(pt.conns), y(v), st[i].color, esc(s.name), formatPlain(pt.conns, 1), strconv.FormatFloat(v, 'f', -1, 64))
			}
		}
	}
}

func dash(s style) string {
	if s.dashed {
		return ` stroke-dasharray="7 4"`
	}
	return ""
}

func esc(s string) string { return html.EscapeString(s) }

// xScale places concurrencies along the x axis. Concurrencies are usually
// doubled from one run to the next (50, 100, 200, 400), so a logarithmic
// axis spaces them evenly; a narrow range is drawn linearly.
type xScale struct {
	lo, hi float64
	log    bool
	ticks  []float64
	note   string // appended to the axis title
}

func xScaleFor(all []series) xScale {
	seen := map[float64]bool{}
	var ticks []float64
	for _, s := range all {
		for _, p := range s.points {
			if !seen[p.conns] {
				seen[p.conns] = true
				ticks = append(ticks, p.conns)
			}
		}
	}
	sort.Float64s(ticks)
	xs := xScale{lo: ticks[0], hi: ticks[len(ticks)-1], ticks: ticks}
	if xs.hi/xs.lo >= 4 {
		xs.log = true
		xs.note = " (log scale)"
	}
	return xs
}

// frac maps a concurrency to 0..1 across the plot, leaving a margin at both
// ends so the first and last points do not sit on the axes.
func (xs xScale) frac(c float64) float64 {
	const margin = 0.06
	if xs.hi == xs.lo {
		return 0.5
	}
	var f float64
	if xs.log {
		f = math.Log(c/xs.lo) / math.Log(xs.hi/xs.lo)
	} else {
		f = (c - xs.lo) / (xs.hi - xs.lo)
	}
	return margin + (1-2*margin)*f
}

// niceAxis picks a tick step of 1, 2 or 5 times a power of ten giving about
// five ticks, and the top of the axis as the first tick a little above max.
func niceAxis(max float64) (step, top float64) {
	if max <= 0 || math.IsNaN(max) {
		return 1, 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch r := raw / mag; {
	case r <= 1:
		step = mag
	case r <= 2:
		step = 2 * mag
	case r <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	// A little headroom keeps the highest line off the top edge.
	top = math.Ceil(max*1.04/step) * step
	return step, top
}

// formatCount writes large counts with a k suffix: 25000 as "25k".
func formatCount(v, step float64) string {
	if step >= 1000 && v != 0 {
		return formatPlain(v/1000, step/1000) + "k"
	}
	return formatPlain(v, step)
}

// formatPlain writes v with as many decimals as the step needs.
func formatPlain(v, step float64) string {
	decimals := 0
	for s := step; s < 1 && decimals < 3; s *= 10 {
		decimals++
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}
