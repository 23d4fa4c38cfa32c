package main

import (
	"fmt"
	"log/slog"
	"strings"

	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/supervisor"
)

// maxNamed bounds each list of the reload line, so a reload that swaps a
// thousand backends still logs one readable line.
const maxNamed = 10

// reloadAttrs are the reload line's account of what a reload changed:
// the backends added and removed, those changed (what changed in each),
// and the settings whose values differ, each list bounded by maxNamed.
func reloadAttrs(ch control.Changes, before, after *config.Config) []any {
	return []any{
		slog.Any("added", bounded(urls(ch.Added))),
		slog.Any("removed", bounded(urls(ch.Removed))),
		slog.Any("changed", bounded(changedBackends(ch, before, after))),
		slog.Any("settings", bounded(config.Changed(before, after))),
	}
}

func urls(ms []supervisor.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.URL
	}
	return out
}

// changedBackends names each backend that stayed but changed, with what
// changed: "http://127.0.0.1:8001 weight 1->3, max_requests 0->10". A
// backend's own TLS settings are in the configuration, not the
// membership, so they are compared there.
func changedBackends(ch control.Changes, before, after *config.Config) []string {
	what := map[string][]string{}
	var order []string
	note := func(url, s string) {
		if what[url] == nil {
			order = append(order, url)
		}
		what[url] = append(what[url], s)
	}
	for _, c := range ch.Changed {
		if c.Before.Weight != c.After.Weight {
			note(c.After.URL, fmt.Sprintf("weight %d->%d", c.Before.Weight, c.After.Weight))
		}
		if c.Before.MaxRequests != c.After.MaxRequests {
			note(c.After.URL, fmt.Sprintf("max_requests %d->%d", c.Before.MaxRequests, c.After.MaxRequests))
		}
	}
	tls := make(map[string]config.UpstreamTLS, len(before.Backends))
	for _, b := range before.Backends {
		tls[b.URL.String()] = b.TLS
	}
	for _, b := range after.Backends {
		if was, ok := tls[b.URL.String()]; ok && was != b.TLS {
			note(b.URL.String(), "tls settings")
		}
	}
	out := make([]string, len(order))
	for i, url := range order {
		out[i] = url + " " + strings.Join(what[url], ", ")
	}
	return out
}

// bounded is names, cut to maxNamed with "and N more" after them; never
// nil, so the log shows an empty list rather than null.
func bounded(names []string) []string {
	if len(names) <= maxNamed {
		return append([]string{}, names...)
	}
	return append(names[:maxNamed:maxNamed], fmt.Sprintf("and %d more", len(names)-maxNamed))
}
