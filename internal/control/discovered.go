package control

import "relay/internal/supervisor"

// Discovered makes set the members relay discovered (in etcd), in every
// process, each in the pool it names: members of an earlier set that are not in it leave, finishing
// what they have in flight; new ones join and are checked at once; a
// member whose weight changed keeps its state. A weight an operator set
// holds until etcd announces another. The file's members and those added
// through the API stay. A discovered URL that one of those already has in
// the same pool is left out while it does: the file's entry wins; so is
// one of a pool relay does not have. The set is kept, so a
// reload or a removal that frees such a URL brings the discovered member
// in. Nothing is logged or kept when the change fails.
func (l *Control) Discovered(set []supervisor.Member) error {
	var log notes
	set = etcdOnly(set)
	return l.commit(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		static, old := staticOf(ms), fromEtcd(ms)
		// What etcd said last time: a weight it still says leaves an
		// operator's in place; a clash it still has was logged.
		before := map[memberKey]int{}
		for _, m := range l.discovered {
			before[keyOf(m)] = m.Weight
		}
		have := keysOf(static)
		next := static
		for _, m := range set {
			k := keyOf(m)
			_, known := before[k] // else any clash was logged when it began
			if !l.knownLocked(m.Pool) {
				if !known {
					log = append(log, l.noPool(m))
				}
				continue
			}
			if have[k] {
				if !known {
					log = append(log, l.leftOut(m))
				}
				continue
			}
			have[k] = true
			was, ok := old[k]
			delete(old, k)
			switch {
			case !ok:
				log = append(log, l.added(m))
			case before[k] == m.Weight:
				// etcd's weight for it is the same: an operator's holds.
				m.Weight = was.Weight
			case was.Weight != m.Weight:
				log = append(log, func() {
					l.log.Info("backend weight changed", "backend", m.URL, "pool", m.Pool, "weight", m.Weight, "was", was.Weight, "by", "etcd", "key", m.Key)
				})
			}
			next = append(next, m)
		}
		for _, m := range old {
			log = append(log, func() { l.log.Info("backend removed", "backend", m.URL, "pool", m.Pool, "by", "etcd", "key", m.Key) })
		}
		return next, nil
	}, nil, func() {
		l.discovered = set
		log.write()
	})
}

// withDiscoveredLocked returns static followed by the members of the last
// discovered set whose URL static does not hold. One that current holds
// keeps its weight there, which may be an operator's. joined logs the
// discovered members that come in and those now left out; the caller
// runs it once the change is made.
func (l *Control) withDiscoveredLocked(static, current []supervisor.Member) (out []supervisor.Member, joined func()) {
	serving := fromEtcd(current)
	var log notes
	have := keysOf(static)
	out = append([]supervisor.Member(nil), static...)
	for _, m := range l.discovered {
		k := keyOf(m)
		cur, ok := serving[k]
		switch {
		case !l.knownLocked(m.Pool):
			continue // until a reload brings its pool
		case have[k]:
			if ok {
				log = append(log, l.leftOut(m))
			}
			continue
		case ok:
			m.Weight = cur.Weight
		default:
			log = append(log, l.added(m))
		}
		have[k] = true
		out = append(out, m)
	}
	return out, log.write
}

// notes are the log lines of a change, written once it is made.
type notes []func()

func (n notes) write() {
	for _, f := range n {
		f()
	}
}

// added is the line of a discovered member joining.
func (l *Control) added(m supervisor.Member) func() {
	return func() {
		l.log.Info("backend added", "backend", m.URL, "pool", m.Pool, "weight", m.Weight, "by", "etcd", "key", m.Key)
	}
}

// noPool is the line of a discovered member left out because relay has
// no pool of its name.
func (l *Control) noPool(m supervisor.Member) func() {
	return func() {
		l.log.Warn("discovered backend left out: relay has no pool of that name", "backend", m.URL, "pool", m.Pool, "key", m.Key)
	}
}

// leftOut is the line of a discovered member left out for the file's or
// the API's member of the same URL.
func (l *Control) leftOut(m supervisor.Member) func() {
	return func() {
		l.log.Warn("discovered backend left out: it is configured already", "backend", m.URL, "pool", m.Pool, "key", m.Key)
	}
}

// fromEtcd is the members of ms that came from etcd, by pool and URL.
func fromEtcd(ms []supervisor.Member) map[memberKey]supervisor.Member {
	out := map[memberKey]supervisor.Member{}
	for _, m := range ms {
		if m.From == supervisor.FromEtcd {
			out[keyOf(m)] = m
		}
	}
	return out
}

// etcdOnly is the members of set that came from etcd, each pool and URL
// once; one that names no pool is the default pool's.
func etcdOnly(set []supervisor.Member) []supervisor.Member {
	out := make([]supervisor.Member, 0, len(set))
	seen := map[memberKey]bool{}
	for _, m := range set {
		if m.Pool == "" {
			m.Pool = DefaultPool
		}
		if m.From == supervisor.FromEtcd && !seen[keyOf(m)] {
			seen[keyOf(m)] = true
			out = append(out, m)
		}
	}
	return out
}

// staticOf is the members of ms that did not come from etcd.
func staticOf(ms []supervisor.Member) []supervisor.Member {
	var out []supervisor.Member
	for _, m := range ms {
		if m.From != supervisor.FromEtcd {
			out = append(out, m)
		}
	}
	return out
}

// keyOf is m's pool and URL.
func keyOf(m supervisor.Member) memberKey { return memberKey{m.Pool, m.URL} }

// keysOf is the pools and URLs of ms.
func keysOf(ms []supervisor.Member) map[memberKey]bool {
	have := make(map[memberKey]bool, len(ms))
	for _, m := range ms {
		have[keyOf(m)] = true
	}
	return have
}
