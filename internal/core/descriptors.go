package core

// ShortOfDescriptors warns that work was refused for want of a
// descriptor, at most every 10 s (Core.rare): under an attack every
// refused request would log a line.
func (c *Core) ShortOfDescriptors(err error) {
	c.rare.Warn("out of file descriptors: new work is refused until connections close",
		"err", err.Error(), "budget", c.cfg.Descriptors.Limit(), "in_use", c.cfg.Descriptors.Used())
}
