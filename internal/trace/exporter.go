package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Exporter sends sampled spans to an OpenTelemetry collector without ever
// making the request that ends a span wait. Export copies a span into a
// bounded queue and returns; when the queue is full the span is dropped
// and counted. One goroutine takes spans from the queue in batches and
// sends each batch once: a batch the collector does not take is dropped
// and counted as failed, never kept for a second try, so a collector that
// is down costs relay the queue's memory and nothing more, and spans flow
// again as soon as it is back. Drops and failures are logged at most once
// a minute each, with how many there were since the last line.
type Exporter struct {
	cfg    ExporterConfig
	log    *slog.Logger
	client client
	enc    *encoder

	// Records go from free to queue (Export) and back (after their batch
	// was sent). made counts the records in being, at most QueueSize, so
	// the queue and the batch being sent hold at most QueueSize spans.
	free  chan *record
	queue chan *record
	made  atomic.Int64

	dropped, exported, failed atomic.Uint64
	closed                    atomic.Bool

	ctx    context.Context // canceled when Close gives up
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when run returns

	closeOnce sync.Once
	closeErr  error

	// The goroutine's own.
	batch       []*record
	dropTally   tally
	failTally   tally
	lastFailure error
}

// logEvery is the most often one kind of trouble is logged.
const logEvery = time.Minute

// NewExporter checks cfg, fills in its defaults and starts the exporter's
// goroutine. It does not wait for the collector: one that is down now is
// reached when it is up. log gets the exporter's warnings; nil discards
// them.
func NewExporter(cfg ExporterConfig, log *slog.Logger) (*Exporter, error) {
	if errs := cfg.Check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl, err := newClient(&cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Exporter{
		cfg:    cfg,
		log:    log,
		client: cl,
		enc:    newEncoder(cfg.ServiceName, cfg.ResourceAttributes),
		free:   make(chan *record, cfg.QueueSize),
		queue:  make(chan *record, cfg.QueueSize),
		ctx:    ctx,
		cancel: cancel,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		batch:  make([]*record, 0, cfg.BatchSize),
	}
	go e.run()
	return e, nil
}

// Export queues a copy of s for sending and returns at once; the caller
// may reuse s as soon as it returns. It never blocks: with the queue full,
// or the exporter closed, the span is dropped and counted. Once the queue
// has been as long as it gets it allocates nothing.
func (e *Exporter) Export(s *Span) {
	if e.closed.Load() {
		e.dropped.Add(1)
		return
	}
	r := e.take()
	if r == nil {
		e.dropped.Add(1)
		return
	}
	r.fill(s)
	select {
	case e.queue <- r:
	default: // cannot happen: the queue has room for every record
		e.recycle(r)
		e.dropped.Add(1)
	}
}

// take is a free record, a new one while fewer than QueueSize exist, or
// nil when all of them are queued or being sent.
func (e *Exporter) take() *record {
	select {
	case r := <-e.free:
		return r
	default:
	}
	if e.made.Add(1) > int64(e.cfg.QueueSize) {
		e.made.Add(-1)
		return nil
	}
	return new(record)
}

func (e *Exporter) recycle(r *record) {
	select {
	case e.free <- r:
	default:
		e.made.Add(-1)
	}
}

// Dropped is how many spans were dropped before they could be sent: the
// queue was full, or the exporter closed.
func (e *Exporter) Dropped() uint64 { return e.dropped.Load() }

// Exported is how many spans the collector took.
func (e *Exporter) Exported() uint64 { return e.exported.Load() }

// Failed is how many spans were sent but not taken: their batch failed, or
// the collector rejected them.
func (e *Exporter) Failed() uint64 { return e.failed.Load() }

// Close sends what is queued, within ctx, and stops the exporter: its
// goroutine and its connections end before Close returns. Spans exported
// meanwhile or later are dropped. It returns an error when ctx ended
// before every queued span was sent.
func (e *Exporter) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		// Sends in flight give up when ctx does.
		stopAfter := context.AfterFunc(ctx, e.cancel)
		close(e.stop)
		<-e.done
		stopAfter()
		e.cancel()
		e.client.close()
		// What an Export racing with Close queued after the last batch.
		left := 0
		for {
			select {
			case <-e.queue:
				left++
				continue
			default:
			}
			break
		}
		e.dropped.Add(uint64(left))
		e.report(time.Now(), true)
		if ctx.Err() != nil {
			e.closeErr = fmt.Errorf("tracing: closing the exporter: %w", ctx.Err())
		}
	})
	return e.closeErr
}

// run batches queued spans and sends them until Close.
func (e *Exporter) run() {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case r := <-e.queue:
			e.batch = append(e.batch, r)
			if len(e.batch) == 1 {
				timer.Reset(e.cfg.BatchTimeout)
			}
			if len(e.batch) >= e.cfg.BatchSize {
				timer.Stop()
				e.send()
			}
		case <-timer.C:
			e.send()
		case <-e.stop:
			timer.Stop()
			e.drain()
			return
		}
		if e.dropped.Load() != e.dropTally.seen {
			e.report(time.Now(), false)
		}
	}
}

// drain sends what is queued when Close is called, batch by batch, while
// Close's context lasts; what is left when it ends is dropped.
func (e *Exporter) drain() {
	for e.ctx.Err() == nil {
		select {
		case r := <-e.queue:
			e.batch = append(e.batch, r)
			if len(e.batch) >= e.cfg.BatchSize {
				e.send()
			}
			continue
		default:
		}
		break
	}
	if e.ctx.Err() != nil {
		e.dropped.Add(uint64(len(e.batch)))
		e.recycleBatch()
		return
	}
	e.send()
}

// send sends the batch once and gives its records back.
func (e *Exporter) send() {
	if len(e.batch) == 0 {
		return
	}
	n := uint64(len(e.batch))
	req := e.enc.encode(e.batch)
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.ExportTimeout)
	rejected, msg, err := e.client.send(ctx, req)
	cancel()
	e.enc.release()
	e.recycleBatch()
	switch {
	case err != nil:
		e.failed.Add(n)
		e.lastFailure = err
	case rejected > 0:
		r := min(uint64(rejected), n)
		e.exported.Add(n - r)
		e.failed.Add(r)
		e.lastFailure = fmt.Errorf("the collector rejected %d of %d spans: %s", r, n, msg)
	default:
		e.exported.Add(n)
		return
	}
	e.report(time.Now(), false)
}

func (e *Exporter) recycleBatch() {
	for i, r := range e.batch {
		e.recycle(r)
		e.batch[i] = nil
	}
	e.batch = e.batch[:0]
}

// report logs drops and failures not logged yet, at most a line a minute
// for each; final, at Close, logs whatever is left.
func (e *Exporter) report(now time.Time, final bool) {
	if n, ok := e.dropTally.due(e.dropped.Load(), now, final); ok {
		e.log.Warn("tracing: span queue full, spans dropped",
			"dropped", n, "dropped_total", e.dropTally.seen, "queue_size", e.cfg.QueueSize,
			"exporter", e.cfg.describe())
	}
	if n, ok := e.failTally.due(e.failed.Load(), now, final); ok {
		errText := ""
		if e.lastFailure != nil {
			errText = e.lastFailure.Error()
		}
		e.log.Warn("tracing: export failed, spans lost",
			"failed", n, "failed_total", e.failTally.seen, "exporter", e.cfg.describe(), "error", errText)
	}
}

// tally decides when a count that grows is worth a log line: at its first
// growth after a quiet minute, then at most once a minute while it grows.
type tally struct {
	seen uint64    // the total at the last line
	at   time.Time // when that line was written
}

// due reports whether total deserves a line now, and how much it grew
// since the last one.
func (t *tally) due(total uint64, now time.Time, final bool) (uint64, bool) {
	if total == t.seen || !final && !t.at.IsZero() && now.Sub(t.at) < logEvery {
		return 0, false
	}
	n := total - t.seen
	t.seen, t.at = total, now
	return n, true
}
