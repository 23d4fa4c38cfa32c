package core

import "time"

// ShortOfDescriptors warns that work was refused for want of a
// descriptor, at most every 10 s (Core.shortLog): under an attack every
// refused request would log a line.
func (c *Core) ShortOfDescriptors(err error) {
	c.shortLog.Warn("out of file descriptors: new work is refused until connections close",
		"err", err.Error(), "budget", c.cfg.Descriptors.Limit(), "in_use", c.cfg.Descriptors.Used())
}

// reclaimIdle closes the upstream connection that has been idle longest,
// in any pool, giving its place in the descriptor budget back, and
// reports whether there was one: with the budget spent, a client or a
// request that needs a connection goes before one kept in case it is
// needed again (fds.Budget.SetReclaim).
func (c *Core) reclaimIdle() bool {
	for range 3 { // another taker may empty the pool picked meanwhile
		if c.pooled.Load() <= 0 {
			return false
		}
		c.mu.Lock()
		pools := make([]*Pool, 0, len(c.pools))
		for _, p := range c.pools {
			pools = append(pools, p)
		}
		c.mu.Unlock()
		var oldest *conns
		var at time.Time
		for _, p := range pools {
			p.mu.Lock()
			for _, cs := range p.conns {
				if t, ok := cs.oldestIdle(); ok && (oldest == nil || t.Before(at)) {
					oldest, at = cs, t
				}
			}
			p.mu.Unlock()
		}
		if oldest == nil {
			return false
		}
		if u := oldest.takeOldest(); u != nil {
			u.close()
			return true
		}
	}
	return false
}
