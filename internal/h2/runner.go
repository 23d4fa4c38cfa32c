package h2

// Each request runs on a goroutine of its own: the core blocks while the
// backend answers. A goroutine started for every stream would cost its
// creation, the growth of its stack to what the core needs, and its end,
// a tenth of what relay spends on a small gRPC call. So the goroutine
// that ran a stream stays, as a runner, and waits for the connection's
// next stream; a stream that finds no runner waiting starts one. At most
// maxIdleRunners wait on a connection, which keeps no more runners than
// that beyond its streams running, and they end with it (close).

// maxIdleRunners bounds the runners waiting on one connection.
const maxIdleRunners = 64

// start runs st on a runner waiting for one, or on a new one.
func (c *conn) start(st *stream) {
	select {
	case c.runq <- st:
	default:
		go c.runner(st)
	}
}

// runner runs st, then the streams handed to it while no more than
// maxIdleRunners wait, until the connection has ended.
func (c *conn) runner(st *stream) {
	growStack(0) // once: the stack stays grown for the streams to come
	for {
		st.run()
		if c.idle.Add(1) > maxIdleRunners {
			c.idle.Add(-1)
			return
		}
		next, ok := <-c.runq
		c.idle.Add(-1)
		if !ok {
			return
		}
		st = next
	}
}
