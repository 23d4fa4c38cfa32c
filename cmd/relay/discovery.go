package main

import (
	"log/slog"
	"reflect"
	"sync"

	"relay/internal/config"
	"relay/internal/discovery"
	"relay/internal/supervisor"
)

// discoverer runs the etcd watch of the configuration relay runs, in the
// control, and hands what it finds to the control as members: every
// process then changes together, as for the admin API and reloads.
type discoverer struct {
	ctl *supervisor.Control
	log *slog.Logger

	mu       sync.Mutex
	settings *config.Etcd // what w watches; nil when discovery is off
	w        *discovery.Watcher
}

func startDiscovery(cfg *config.Config, ctl *supervisor.Control, log *slog.Logger) *discoverer {
	d := &discoverer{ctl: ctl, log: log}
	d.reload(cfg)
	return d
}

// reload follows cfg's discovery settings: unchanged, the watch goes on;
// changed, it starts again under them (the members found so far stay
// until the new watch lists); removed, the discovered members leave.
func (d *discoverer) reload(cfg *config.Config) {
	d.mu.Lock()
	defer d.mu.Unlock()
	next := cfg.Discovery.Etcd
	if reflect.DeepEqual(next, d.settings) {
		return
	}
	if d.w != nil {
		d.w.Stop()
		d.w = nil
	}
	d.settings = next
	if next == nil {
		if err := d.ctl.Discovered(nil); err != nil {
			d.log.Error("discovery: removing the discovered backends failed", "err", err.Error())
		}
		return
	}
	d.w = discovery.Watch(next, d.log, d.apply)
}

// apply makes set the discovered members.
func (d *discoverer) apply(set []discovery.Backend) {
	ms := make([]supervisor.Member, len(set))
	for i, b := range set {
		ms[i] = supervisor.Member{URL: b.URL, Weight: b.Weight, From: supervisor.FromEtcd, Key: b.Key}
	}
	if err := d.ctl.Discovered(ms); err != nil {
		d.log.Error("discovery: the discovered backends could not be applied; relay keeps the ones it has", "err", err.Error())
	}
}

func (d *discoverer) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w != nil {
		d.w.Stop()
		d.w = nil
	}
}
