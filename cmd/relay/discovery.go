package main

import (
	"log/slog"
	"reflect"
	"slices"
	"sync"

	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/discovery"
	"relay/internal/supervisor"
)

// discoverer runs the etcd watch of the configuration relay runs, in the
// control, and hands what it finds to the control as members: every
// process then changes together, as for the admin API and reloads. It
// also keeps relay's own announcement, when the configuration asks for
// one, from the moment relay serves until it begins to stop.
type discoverer struct {
	ctl *control.Control
	log *slog.Logger

	mu       sync.Mutex
	settings *config.Etcd // what w watches; nil when discovery is off
	w        *discovery.Watcher

	serving      bool         // between announce and withdraw
	announced    *config.Etcd // what the announcement runs under; nil when none runs
	announcement *discovery.Announcement
}

func startDiscovery(cfg *config.Config, ctl *control.Control, log *slog.Logger) *discoverer {
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
	d.reannounceLocked(next)
	if reflect.DeepEqual(watchOf(next), watchOf(d.settings)) {
		d.settings = next
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
	d.w = discovery.Watch(next, d.log, d.apply, d.ctl.Self)
}

// apply makes set the discovered members, each of the pool its value
// names (the default pool when it names none).
func (d *discoverer) apply(set []discovery.Backend) error {
	ms := make([]supervisor.Member, len(set))
	for i, b := range set {
		ms[i] = supervisor.Member{Pool: b.Pool, URL: b.URL, Weight: b.Weight, From: supervisor.FromEtcd, Key: b.Key}
	}
	return d.ctl.Discovered(ms)
}

// stop ends the watch and the announcement.
func (d *discoverer) stop() {
	d.withdraw()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w != nil {
		d.w.Stop()
		d.w = nil
	}
}

// announce registers relay in etcd, if its configuration says to; it is
// called once relay serves.
func (d *discoverer) announce() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serving = true
	d.reannounceLocked(d.settings)
}

// withdraw takes relay's key out of etcd; it is called as relay begins to
// stop, so whatever finds relay there stops sending new clients while
// the requests in flight finish.
func (d *discoverer) withdraw() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.serving = false
	d.reannounceLocked(nil)
}

// reannounceLocked makes the announcement follow e: unchanged, it goes on;
// changed, it is withdrawn and made again; gone (or relay not serving),
// withdrawn.
func (d *discoverer) reannounceLocked(e *config.Etcd) {
	next := announceOf(e)
	if !d.serving {
		next = nil
	}
	if reflect.DeepEqual(next, d.announced) {
		return
	}
	old := d.announcement
	sameKey := old != nil && next != nil && announcedKey(next) == announcedKey(d.announced) &&
		slices.Equal(next.Endpoints, d.announced.Endpoints)
	if old != nil && !sameKey {
		old.Withdraw()
	}
	d.announced, d.announcement = next, nil
	if next != nil {
		a := next.Announce
		d.announcement = discovery.Announce(next, announcedKey(next), discovery.Marshal(a.URL, a.Weight), a.TTL, d.log)
	}
	if sameKey {
		// The new announcement puts the key under its own lease; the
		// old one lets go without deleting it, so the key never
		// disappears in between.
		old.Replaced()
	}
}

// announcedKey is the key relay announces itself under with e.
func announcedKey(e *config.Etcd) string {
	return discovery.KeyFor(e.Announce.Prefix, e.Announce.URL)
}

// watchOf is what of e the watch depends on: all but the announcement.
func watchOf(e *config.Etcd) *config.Etcd {
	if e == nil {
		return nil
	}
	w := *e
	w.Announce = nil
	return &w
}

// announceOf is what of e the announcement depends on: all but the
// watched prefix; nil when e announces nothing.
func announceOf(e *config.Etcd) *config.Etcd {
	if e == nil || e.Announce == nil {
		return nil
	}
	a := *e
	a.Prefix = ""
	return &a
}
