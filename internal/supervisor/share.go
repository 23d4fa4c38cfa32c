package supervisor

// Share is process index's part of a relay-wide cap on requests in flight
// split over procs serving processes. The kernel spreads connections evenly
// over the processes' sockets, so each takes an equal part, the first
// limit%procs one more, and together they never exceed the cap. A cap of
// 0 (none) stays 0; configuration checks refuse caps smaller than procs.
func Share(limit, procs, index int) int {
	if limit <= 0 || procs <= 1 {
		return limit
	}
	part := limit / procs
	if index < limit%procs {
		part++
	}
	return part
}
