package supervisor

// Discovered makes set the members relay discovered (in etcd), in every
// process: members of an earlier set that are not in it leave, finishing
// what they have in flight; new ones join and are checked at once; a
// member whose weight changed keeps its state. A weight an operator set
// holds until etcd announces another. The file's members and those added
// through the API stay. A discovered URL that one of those already has is
// left out while it does: the file's entry wins. The set is kept, so a
// reload or a removal that frees such a URL brings the discovered member
// in. Nothing is logged or kept when the change fails.
func (l *Control) Discovered(set []Member) error {
	var (
		announced map[string]int
		clashes   map[string]bool
		notes     []func()
	)
	return l.commit(func(ms []Member) ([]Member, error) {
		static := staticOf(ms)
		old := map[string]Member{}
		for _, m := range ms {
			if m.From == FromEtcd {
				old[m.URL] = m
			}
		}
		have := urlsOf(static)
		next := static
		announced, clashes = map[string]int{}, map[string]bool{}
		for _, m := range set {
			switch {
			case m.From != FromEtcd || announced[m.URL] != 0 || clashes[m.URL]:
				continue
			case have[m.URL]:
				clashes[m.URL] = true
				if !l.clashes[m.URL] {
					notes = append(notes, func() {
						l.log.Warn("discovered backend left out: it is configured already", "backend", m.URL, "key", m.Key)
					})
				}
				continue
			}
			announced[m.URL] = m.Weight
			was, ok := old[m.URL]
			delete(old, m.URL)
			switch {
			case !ok:
				notes = append(notes, func() {
					l.log.Info("backend added", "backend", m.URL, "weight", m.Weight, "by", "etcd", "key", m.Key)
				})
			case l.announced[m.URL] == m.Weight:
				// etcd's weight for it is the same: an operator's holds.
				m.Weight = was.Weight
			case was.Weight != m.Weight:
				notes = append(notes, func() {
					l.log.Info("backend weight changed", "backend", m.URL, "weight", m.Weight, "was", was.Weight, "by", "etcd", "key", m.Key)
				})
			}
			next = append(next, m)
		}
		for _, m := range old {
			notes = append(notes, func() { l.log.Info("backend removed", "backend", m.URL, "by", "etcd", "key", m.Key) })
		}
		return next, nil
	}, nil, func() {
		l.discovered = append([]Member(nil), set...)
		l.announced, l.clashes = announced, clashes
		for _, note := range notes {
			note()
		}
	})
}

// withDiscoveredLocked returns static followed by the members of the last
// discovered set whose URL static does not hold. One that current holds
// keeps its weight there, which may be an operator's.
func (l *Control) withDiscoveredLocked(static, current []Member) []Member {
	weights := map[string]int{}
	for _, m := range current {
		if m.From == FromEtcd {
			weights[m.URL] = m.Weight
		}
	}
	have := urlsOf(static)
	out := append([]Member(nil), static...)
	for _, m := range l.discovered {
		if have[m.URL] {
			continue
		}
		have[m.URL] = true
		if w, ok := weights[m.URL]; ok {
			m.Weight = w
		}
		out = append(out, m)
	}
	return out
}

// staticOf is the members of ms that did not come from etcd.
func staticOf(ms []Member) []Member {
	var out []Member
	for _, m := range ms {
		if m.From != FromEtcd {
			out = append(out, m)
		}
	}
	return out
}

func urlsOf(ms []Member) map[string]bool {
	have := make(map[string]bool, len(ms))
	for _, m := range ms {
		have[m.URL] = true
	}
	return have
}
