package core

import (
	"sync/atomic"
	"time"
)

// shortLogEvery spaces the warnings that relay is out of descriptors: under
// an attack every refused request would log one.
const shortLogEvery = 10 * time.Second

// ShortOfDescriptors warns that work was refused for want of a
// descriptor, at most once per shortLogEvery, with how many were refused
// since the last warning.
func (c *Core) ShortOfDescriptors(err error) {
	c.shortRefused.Add(1)
	now := time.Now().UnixNano()
	last := c.shortLogged.Load()
	if now-last < int64(shortLogEvery) || !c.shortLogged.CompareAndSwap(last, now) {
		return
	}
	c.cfg.Logger.Warn("out of file descriptors: new work is refused until connections close",
		"err", err.Error(), "refused", c.shortRefused.Swap(0),
		"budget", c.cfg.Descriptors.Limit(), "in_use", c.cfg.Descriptors.Used())
}

// shortLog is the state of ShortOfDescriptors.
type shortLog struct {
	shortLogged  atomic.Int64 // when the last warning went out, Unix ns
	shortRefused atomic.Uint64
}
