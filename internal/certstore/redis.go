package certstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
)

// RedisOptions say where in Redis a store keeps its keys.
type RedisOptions struct {
	// Prefix is the prefix of every key the store writes; "" means
	// "relay:certs:". A value is a hash at Prefix+"k:"+key with fields v
	// (the value) and m (when it was stored, Unix nanoseconds); the keys
	// are also members of the sorted set Prefix+"index", by which List
	// and Delete find the keys under a directory; locks are at
	// Prefix+"lock:"+name.
	Prefix string
	// Lease is how long a lock outlives its holder at most; 0 means
	// DefaultLease.
	Lease time.Duration
}

// Redis is a certmagic.Storage in Redis. A lock is a key set with
// SET NX PX to a random token of its holder, renewed by a goroutine of
// the holder every third of the lease and deleted only by a script that
// compares the token: a holder that dies frees it within a lease.
//
// List reads a sorted set of the store's keys, by lexical range, rather
// than SCAN: SCAN walks the whole database (rate limit buckets and all)
// and may return a key twice, while the index costs one ZADD per Store,
// in the same script, and answers a directory in one range read.
type Redis struct {
	c      redis.UniversalClient
	prefix string
	index  string
	lease  time.Duration
	local  localLocks

	mu   sync.Mutex
	held map[string]*redisLock
}

type redisLock struct {
	token string
	stop  context.CancelFunc
	done  chan struct{}
}

var (
	_ certmagic.Storage          = (*Redis)(nil)
	_ certmagic.TryLocker        = (*Redis)(nil)
	_ certmagic.LockLeaseRenewer = (*Redis)(nil)
)

// NewRedis is a store over c, which the caller closes after the store's
// last use.
func NewRedis(c redis.UniversalClient, o RedisOptions) *Redis {
	p := o.Prefix
	if p == "" {
		p = "relay:certs:"
	}
	lease := o.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	return &Redis{c: c, prefix: p, index: p + "index", lease: lease, held: map[string]*redisLock{}}
}

var (
	// storeScript: KEYS[1] the hash, KEYS[2] the index; ARGV the value,
	// the time, the key.
	storeScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'm', ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[3])
return 1`)
	// deleteScript: KEYS[1] the index; ARGV the key ("" for all), the
	// hashes' prefix. Deletes the key and the keys under it.
	deleteScript = redis.NewScript(`
local key, hp = ARGV[1], ARGV[2]
local ks
if key == '' then
  ks = redis.call('ZRANGE', KEYS[1], 0, -1)
else
  ks = redis.call('ZRANGEBYLEX', KEYS[1], '[' .. key .. '/', '(' .. key .. '0')
  table.insert(ks, key)
end
for _, k in ipairs(ks) do
  redis.call('DEL', hp .. k)
  redis.call('ZREM', KEYS[1], k)
end
return #ks`)
	// renewScript and unlockScript act on a lock only while it holds the
	// caller's token.
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

func (s *Redis) hash(key string) string { return s.prefix + "k:" + key }

// Store puts value at key.
func (s *Redis) Store(ctx context.Context, key string, value []byte) error {
	key = cleanKey(key)
	if err := checkValue(key, value); err != nil {
		return err
	}
	err := storeScript.Run(ctx, s.c, []string{s.hash(key), s.index}, value, time.Now().UnixNano(), key).Err()
	if err != nil {
		return fmt.Errorf("certstore: redis: storing %q: %w", key, err)
	}
	return nil
}

// Load is the value at key.
func (s *Redis) Load(ctx context.Context, key string) ([]byte, error) {
	key = cleanKey(key)
	v, err := s.c.HGet(ctx, s.hash(key), "v").Bytes()
	if errors.Is(err, redis.Nil) || (err == nil && key == "") {
		return nil, fmt.Errorf("certstore: loading %q: %w", key, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("certstore: redis: loading %q: %w", key, err)
	}
	return v, nil
}

// Delete removes key and every key under it.
func (s *Redis) Delete(ctx context.Context, key string) error {
	key = cleanKey(key)
	if err := deleteScript.Run(ctx, s.c, []string{s.index}, key, s.prefix+"k:").Err(); err != nil {
		return fmt.Errorf("certstore: redis: deleting %q: %w", key, err)
	}
	return nil
}

// below is the keys under dir, at most limit of them when limit > 0.
func (s *Redis) below(ctx context.Context, dir string, limit int64) ([]string, error) {
	by := &redis.ZRangeBy{Min: "-", Max: "+", Count: limit}
	if dir != "" {
		by.Min, by.Max = "["+dir+"/", "("+dir+"0"
	}
	if limit <= 0 {
		by.Count = 0
	}
	return s.c.ZRangeByLex(ctx, s.index, by).Result()
}

// isFile says whether a value is stored at key.
func (s *Redis) isFile(ctx context.Context, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	_, err := s.c.ZScore(ctx, s.index, key).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// Exists says whether key is a file or a directory.
func (s *Redis) Exists(ctx context.Context, key string) bool {
	key = cleanKey(key)
	if f, err := s.isFile(ctx, key); err != nil || f {
		return f
	}
	ks, err := s.below(ctx, key, 1)
	return err == nil && len(ks) > 0
}

// List is the children of dir, or everything below it when recursive.
func (s *Redis) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = cleanKey(dir)
	ks, err := s.below(ctx, dir, 0)
	if err != nil {
		return nil, fmt.Errorf("certstore: redis: listing %q: %w", dir, err)
	}
	if len(ks) == 0 {
		f, err := s.isFile(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("certstore: redis: listing %q: %w", dir, err)
		}
		if !f {
			return nil, fmt.Errorf("certstore: listing %q: %w", dir, fs.ErrNotExist)
		}
	}
	return listOf(dir, ks, recursive), nil
}

// Stat is what is known about key.
func (s *Redis) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = cleanKey(key)
	if key != "" {
		pipe := s.c.Pipeline()
		m := pipe.HGet(ctx, s.hash(key), "m")
		n := pipe.HStrLen(ctx, s.hash(key), "v")
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return certmagic.KeyInfo{}, fmt.Errorf("certstore: redis: stat %q: %w", key, err)
		}
		if ms, err := m.Result(); err == nil {
			ki := certmagic.KeyInfo{Key: key, IsTerminal: true, Size: n.Val()}
			if ns, err := strconv.ParseInt(ms, 10, 64); err == nil {
				ki.Modified = time.Unix(0, ns)
			}
			return ki, nil
		}
	}
	ks, err := s.below(ctx, key, 1)
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: redis: stat %q: %w", key, err)
	}
	if len(ks) == 0 && key != "" {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: stat %q: %w", key, fs.ErrNotExist)
	}
	return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
}

func (s *Redis) lockKey(name string) string { return s.prefix + "lock:" + name }

// pollEvery is how often a waiting Lock asks whether the lock is free.
func (s *Redis) pollEvery() time.Duration {
	return min(max(s.lease/20, 20*time.Millisecond), 500*time.Millisecond)
}

// Lock waits until this store holds name, or ctx is done.
func (s *Redis) Lock(ctx context.Context, name string) error {
	if err := s.local.acquire(ctx, name); err != nil {
		return err
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.local.release(name)
			return ctx.Err()
		case <-t.C:
		}
		ok, err := s.take(ctx, name)
		if ok {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			// Redis away: the lock cannot be had, but it may be soon.
			t.Reset(s.lease / 4)
			continue
		}
		t.Reset(s.pollEvery())
	}
}

// TryLock takes name if no one holds it.
func (s *Redis) TryLock(ctx context.Context, name string) (bool, error) {
	if !s.local.tryAcquire(name) {
		return false, nil
	}
	ok, err := s.take(ctx, name)
	if !ok {
		s.local.release(name)
	}
	return ok, err
}

// take sets name's lock to a new token if it is free, and then keeps it.
func (s *Redis) take(ctx context.Context, name string) (bool, error) {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	ok, err := s.c.SetNX(ctx, s.lockKey(name), token, s.lease).Result()
	if err != nil {
		return false, fmt.Errorf("certstore: redis: locking %q: %w", name, err)
	}
	if !ok {
		return false, nil
	}
	rctx, stop := context.WithCancel(context.Background())
	l := &redisLock{token: token, stop: stop, done: make(chan struct{})}
	go s.renew(rctx, name, l)
	s.mu.Lock()
	s.held[name] = l
	s.mu.Unlock()
	return true, nil
}

// renew keeps l's lease until stopped or the lock is found lost.
func (s *Redis) renew(ctx context.Context, name string, l *redisLock) {
	defer close(l.done)
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, s.lease/3)
		n, err := renewScript.Run(rctx, s.c, []string{s.lockKey(name)}, l.token, s.lease.Milliseconds()).Int()
		cancel()
		if err == nil && n == 0 {
			return // expired and perhaps taken: Unlock will say so
		}
	}
}

// Unlock frees name, which this store holds.
func (s *Redis) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	l := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("certstore: redis: unlocking %q: %w", name, ErrNotLocked)
	}
	defer s.local.release(name)
	l.stop()
	<-l.done
	n, err := unlockScript.Run(ctx, s.c, []string{s.lockKey(name)}, l.token).Int()
	if err != nil {
		return fmt.Errorf("certstore: redis: unlocking %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("certstore: redis: unlocking %q: its lease had expired: %w", name, ErrNotLocked)
	}
	return nil
}

// RenewLockLease renews the lease of lockKey, which this store holds, now,
// and fails when the lock is no longer this store's. The lease stays the
// store's own: the holder's goroutine renews it for as long as the holder
// lives, and the leaseDuration certmagic asks for (minutes) would keep a
// dead holder's lock for as long.
func (s *Redis) RenewLockLease(ctx context.Context, lockKey string, leaseDuration time.Duration) error {
	s.mu.Lock()
	l := s.held[lockKey]
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("certstore: redis: renewing %q: %w", lockKey, ErrNotLocked)
	}
	n, err := renewScript.Run(ctx, s.c, []string{s.lockKey(lockKey)}, l.token, s.lease.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("certstore: redis: renewing %q: %w", lockKey, err)
	}
	if n == 0 {
		return fmt.Errorf("certstore: redis: renewing %q: its lease had expired: %w", lockKey, ErrNotLocked)
	}
	return nil
}
