package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisOptions say where a Redis store is and how long a request may wait
// for it.
type RedisOptions struct {
	Address            string // host:port
	Username, Password string
	DB                 int
	// Timeout is the longest a request waits for Redis; 0 means 50ms.
	Timeout time.Duration
	// Prefix is the prefix of every key relay writes; "" means "relay:".
	Prefix string
	// Logger receives the store's state changes; nil discards them.
	Logger *slog.Logger
}

// Failure says what a limit over a store answers while the store is
// unreachable.
type Failure uint8

const (
	// FailOpen lets requests through while the store is unreachable, as
	// Envoy's rate limit filter does by default: a limit protects the
	// backends from too much traffic, and a store outage is not a reason
	// to refuse all of it.
	FailOpen Failure = iota
	// FailClosed refuses requests while the store is unreachable, with a
	// Wait of 1s: for limits that guard something that must never see
	// more than its rate.
	FailClosed
	// FailLocal takes tokens from a limiter of this instance's own while
	// the store is unreachable (LimitLocal): each instance then enforces
	// the limit alone, so n instances admit up to n times it, rather
	// than everything or nothing.
	FailLocal
)

const (
	// redisTimeout is RedisOptions.Timeout's default: a round trip in one
	// data centre takes well under a millisecond, so 50ms is a store in
	// trouble, and a request held longer would cost more than the limit
	// protects.
	redisTimeout = 50 * time.Millisecond
	// redisFetchers is the round trips one store has in flight at most:
	// the goroutines that fetch leases, each on one connection of the
	// pool. At a local round trip of about 100µs that is over 100,000
	// leases a second.
	redisFetchers = 16
	// redisQueue is the leases waiting for a fetcher at most. A request
	// whose key needs a lease when the queue is full is answered as the
	// limit's Failure says: Redis is not keeping up.
	redisQueue = 4096
	// redisProbeEvery is how often a store marked down is asked whether
	// it is back.
	redisProbeEvery = time.Second
	// overflowLogEvery spaces the warnings that the fetch queue was full.
	overflowLogEvery = 10 * time.Second
	// failedWait is the Wait of a request refused because the store is
	// unreachable: long enough that a client that honours Retry-After
	// does not hammer relay, short enough to notice the store's return.
	failedWait = time.Second
)

// Redis is a store of token buckets in Redis, so several relay instances
// enforce one limit. The buckets live in Redis, one key each, updated by
// a script (redis_script.go); each process leases tokens from them in
// batches and takes them locally (redis_lease.go), so a request waits for
// Redis only when its key has no lease yet.
type Redis struct {
	client  *redis.Client
	addr    string
	prefix  string
	timeout time.Duration
	log     *slog.Logger
	start   time.Time // the origin of the store's monotonic times
	seed    [2]uint64 // the lease table's hash seed
	leases  *leaseTable

	queue chan *lease   // leases to fetch
	probe chan struct{} // wakes the prober when the store goes down
	down  atomic.Bool
	// closed is set by Close: limits then answer as their Failure says.
	closed atomic.Bool
	// open, shut and local count the limits that fail open, closed and
	// to their own buckets, for the log line that says what requests get
	// while the store is down.
	open, shut, local atomic.Int32
	// overflows counts the requests answered as their Failure says
	// because the fetch queue was full; overflowLogged is when that was
	// last logged (nanoseconds since start), so it is said at most every
	// overflowLogEvery, with the count since.
	overflows      atomic.Uint64
	overflowLogged atomic.Int64
	// fetches counts the leases asked for, for the store's tests.
	fetches atomic.Uint64

	ctx    context.Context // canceled by Close, ending round trips
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// NewRedis returns a store over one go-redis client. It does not fail
// when Redis is down at start: limits then answer as their Failure says,
// and recover by themselves.
func NewRedis(o RedisOptions) *Redis {
	if o.Timeout <= 0 {
		o.Timeout = redisTimeout
	}
	if o.Prefix == "" {
		o.Prefix = "relay:"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	client := redis.NewClient(&redis.Options{
		Addr:     o.Address,
		Username: o.Username,
		Password: o.Password,
		DB:       o.DB,
		// RESP2, without the client's identity or maintenance
		// notifications: each is a command relay does not need, and
		// the notifications run goroutines of their own.
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		// Every wait is the request's: a round trip, a dial, a turn
		// for a connection are each bounded by Timeout, and the
		// context of a round trip says the same.
		DialTimeout:           o.Timeout,
		ReadTimeout:           o.Timeout,
		WriteTimeout:          o.Timeout,
		PoolTimeout:           o.Timeout,
		ContextTimeoutEnabled: true,
		// One connection a fetcher and one for the prober: more would
		// never be used, fewer would make fetchers wait for each other.
		PoolSize: redisFetchers + 1,
		// A connection Redis closed (a restart) fails once and is
		// retried on a new one, soon, within the request's Timeout.
		MaxRetries: 2,
		// One dial a try: go-redis's own retries of a dial would outlast
		// Timeout and leave the log with "context deadline exceeded"
		// where "connection refused" says what is wrong.
		DialerRetries:   1,
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 4 * time.Millisecond,
	})
	var seed [16]byte
	rand.Read(seed[:])
	r := &Redis{
		client:  client,
		addr:    o.Address,
		prefix:  o.Prefix,
		timeout: o.Timeout,
		log:     o.Logger,
		start:   time.Now(),
		seed:    [2]uint64{binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])},
		leases:  newLeaseTable(redisLeases),
		queue:   make(chan *lease, redisQueue),
		probe:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(redisFetchers + 1)
	for range redisFetchers {
		go r.fetcher()
	}
	go r.prober()
	return r
}

// Close stops the store's goroutines and closes its connections. Limits
// over it then answer as their Failure says.
func (r *Redis) Close() error {
	var err error
	r.once.Do(func() {
		r.closed.Store(true)
		close(r.stop)
		r.cancel()
		r.wg.Wait()
		// Leases still queued are never fetched: their requests stop
		// waiting now rather than at their timeout.
		for {
			select {
			case l := <-r.queue:
				l.fetched(0, 0, 0, 0, errStoreClosed)
				continue
			default:
			}
			break
		}
		err = r.client.Close()
	})
	return err
}

// quiet is go-redis's logger: it would print each failed dial to stderr,
// a line per request during an outage. The store logs an outage once,
// through relay's logger, instead.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

var (
	errStoreDown   = errors.New("rate limit store unreachable")
	errStoreClosed = errors.New("rate limit store closed")
)

// mono is t as the store's monotonic time, in nanoseconds.
func (r *Redis) mono(t time.Time) int64 { return int64(t.Sub(r.start)) }

// fetcher fetches the leases queued, one round trip at a time, until the
// store is closed.
func (r *Redis) fetcher() {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			return
		case l := <-r.queue:
			r.fetch(l)
		}
	}
}

// markDown records that a round trip failed. The first failure while the
// store is up logs it and wakes the prober; later ones, until the store
// is up again, say nothing, so an outage is one line however many
// requests it meets.
func (r *Redis) markDown(err error) {
	if r.closed.Load() || !r.down.CompareAndSwap(false, true) {
		return
	}
	r.log.Warn("rate limit store unreachable", "address", r.addr, "error", err.Error(),
		"requests", r.whileDown())
	select {
	case r.probe <- struct{}{}:
	default:
	}
}

// whileDown says what requests get while the store is down, from its
// limits' Failure.
func (r *Redis) whileDown() string {
	var says []string
	if r.open.Load() > 0 {
		says = append(says, "allowed")
	}
	if r.shut.Load() > 0 {
		says = append(says, "refused")
	}
	if r.local.Load() > 0 {
		says = append(says, "limited by each instance alone")
	}
	if len(says) > 1 {
		return strings.Join(says, " or ") + ", as each limit's on_store_error says"
	}
	return strings.Join(says, "")
}

// prober waits for the store to go down, then probes it every second
// until it answers, and marks it up again.
func (r *Redis) prober() {
	defer r.wg.Done()
	for {
		select {
		case <-r.stop:
			return
		case <-r.probe:
		}
		r.probeUntilUp()
	}
}

func (r *Redis) probeUntilUp() {
	tick := time.NewTicker(redisProbeEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
		err := r.probeOnce(ctx)
		cancel()
		if err == nil {
			r.down.Store(false)
			r.log.Info("rate limit store reachable again", "address", r.addr)
			return
		}
	}
}

// probeOnce asks Redis what requests ask of it: the script, on a key of
// its own holding a bucket that is full again a microsecond later, named
// as the buckets are (no bucket's 32 hex digits spell "probe"), so a
// Redis user allowed the buckets' keys alone may write it too. A
// PING would find up a Redis that answers every request's script with
// an error (a user without EVAL, writes refused for memory), and the
// store would go up and down, and log it, every second.
func (r *Redis) probeOnce(ctx context.Context) error {
	v, err := takeScript.Run(ctx, r.client, []string{r.prefix + "rl:probe"}, "1", 1, 1).Int64Slice()
	if err == nil && len(v) != 3 {
		err = errBadReply
	}
	return err
}

// Limit returns the limiter of spec s over r, answering as f says while
// r is unreachable. name tells one limit's buckets from another's: limits
// of the same name, in every relay instance over the same Redis, share
// their buckets.
func (r *Redis) Limit(name string, s Spec, f Failure) Limiter {
	switch f {
	case FailClosed:
		r.shut.Add(1)
	case FailLocal:
		panic("ratelimit: FailLocal needs Redis.LimitLocal, which is given the local limiter")
	default:
		r.open.Add(1)
	}
	return newRedisLimit(r, name, s, f)
}

// LimitLocal is Limit with FailLocal: while r is unreachable, or too far
// behind to fetch a lease, requests take their tokens from local, a
// limiter of this instance's own with the same spec.
func (r *Redis) LimitLocal(name string, s Spec, local Limiter) Limiter {
	r.local.Add(1)
	l := newRedisLimit(r, name, s, FailLocal)
	l.local = local
	return l
}

// overflowed notes a request answered as its limit's Failure says
// because the fetch queue was full, and says so at most every
// overflowLogEvery: a flood of new keys can do it on every request.
func (r *Redis) overflowed() {
	n := r.overflows.Add(1)
	now := int64(time.Since(r.start))
	last := r.overflowLogged.Load()
	if (last != 0 && now-last < int64(overflowLogEvery)) || !r.overflowLogged.CompareAndSwap(last, max(now, 1)) {
		return
	}
	r.log.Warn("rate limit store overloaded: requests whose keys needed a lease were answered as on_store_error says",
		"address", r.addr, "requests", n, "queued", redisQueue)
}
