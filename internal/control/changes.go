package control

import "relay/internal/supervisor"

// Changes is what a reload did to the pools' membership, for the line
// that reports it.
type Changes struct {
	// Added and Removed are the members that came and went, in
	// membership order.
	Added, Removed []supervisor.Member
	// Changed pairs a member that stayed with what it was before, for
	// those whose weight or request cap changed.
	Changed []MemberChange
}

// MemberChange is one member that stayed, before and after a change.
type MemberChange struct {
	Before, After supervisor.Member
}

// changesOf compares two memberships by pool and URL.
func changesOf(before, after []supervisor.Member) Changes {
	var c Changes
	old := make(map[memberKey]supervisor.Member, len(before))
	for _, m := range before {
		old[keyOf(m)] = m
	}
	now := keysOf(after)
	for _, m := range after {
		was, stayed := old[keyOf(m)]
		switch {
		case !stayed:
			c.Added = append(c.Added, m)
		case was.Weight != m.Weight || was.MaxRequests != m.MaxRequests:
			c.Changed = append(c.Changed, MemberChange{Before: was, After: m})
		}
	}
	for _, m := range before {
		if !now[keyOf(m)] {
			c.Removed = append(c.Removed, m)
		}
	}
	return c
}
