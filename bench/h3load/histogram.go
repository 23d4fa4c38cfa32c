package main

import (
	"math"
	"sync/atomic"
	"time"
)

// bucketWidth and buckets make the histogram's range: 10 µs steps up to
// 1 s; slower responses share the last bucket.
const (
	bucketWidth = 10 * time.Microsecond
	buckets     = int(time.Second / bucketWidth)
)

// Histogram counts latencies in fixed buckets, safely from many
// goroutines, in constant memory however long the run.
type Histogram struct {
	counts [buckets + 1]atomic.Uint64
	total  atomic.Uint64
}

// Add counts one latency.
func (h *Histogram) Add(d time.Duration) {
	i := int(d / bucketWidth)
	if i > buckets || i < 0 {
		i = buckets
	}
	h.counts[i].Add(1)
	h.total.Add(1)
}

// Quantile is the upper edge of the bucket holding the q-quantile
// latency by nearest rank (0 < q <= 1), so within 10 µs above it; 0
// with nothing counted, and more than 1 s for one among the slowest.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n))) // nearest rank
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return time.Duration(i+1) * bucketWidth
		}
	}
	return time.Duration(buckets+1) * bucketWidth
}
