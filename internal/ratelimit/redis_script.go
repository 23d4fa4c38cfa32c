package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// takeScript is a bucket's GCRA in Redis: it takes up to ARGV[3] tokens
// from the bucket KEYS[1], whose settings are ARGV[1], the time one token
// takes in microseconds (a fraction when the rate is over a million), and
// ARGV[2], the burst. It returns the tokens granted g (as many as the
// bucket holds, up to the number asked, maybe none), the tokens the
// bucket holds after, and, when g is 0, the microseconds until it holds
// one.
//
// The clock is Redis's own TIME, so the instances' clocks do not matter.
// The bucket is its tat, in microseconds as a double: a Lua number, exact
// to a quarter of a microsecond at today's times, which is a token's
// worth only at rates over four million a second, where a lease is
// hundreds of thousands of tokens. It expires when the bucket is full
// again, since a missing key is exactly a full bucket: Redis holds only
// the buckets of keys that took a token within burst/rate seconds.
//
// Redis 7 replicates a script's effects, not the script, so reading TIME
// before writing is allowed, and a replica gets the tat as written.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local window = burst * iv
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
-- The tokens the bucket holds; the small term absorbs a division's
-- rounding just under a whole number.
local avail = math.floor((now + window - tat) / iv + 1e-6)
if avail > burst then avail = burst end
if avail < 0 then avail = 0 end
local g = math.min(want, avail)
if g <= 0 then
  local wait = math.ceil(tat + iv - window - now)
  if wait < 1 then wait = 1 end
  return {0, 0, wait}
end
tat = tat + g * iv
local ttl = math.ceil((tat - now) / 1000)
if ttl < 1 then ttl = 1 end
redis.call('SET', KEYS[1], string.format('%.17g', tat), 'PX', ttl)
return {g, avail - g, 0}
`)

// redisKey is the key of name's bucket for key, alike in every instance:
// Prefix "rl:" and a hash of both, 16 bytes of SHA-256 in hex, so a key
// of any length or content (a header's value) makes a short, safe name,
// and no two buckets meet by chance.
func redisKey(prefix, name string, key []byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(name)))])
	h.Write([]byte(name))
	h.Write(key)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return prefix + "rl:" + hex.EncodeToString(sum[:16])
}

// fetch asks Redis for l's lease, and hands the answer to l. A failed
// round trip marks the store down.
func (r *Redis) fetch(l *lease) {
	r.fetches.Add(1)
	if r.down.Load() || r.closed.Load() {
		l.fetched(0, 0, 0, 0, errStoreDown)
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	v, err := takeScript.Run(ctx, r.client, l.keys, l.limit.args...).Int64Slice()
	cancel()
	now := r.mono(time.Now())
	if err == nil && len(v) != 3 {
		err = errBadReply
	}
	if err != nil {
		l.fetched(0, 0, 0, now, err)
		if !r.closed.Load() {
			r.markDown(err)
		}
		return
	}
	l.fetched(v[0], v[1], time.Duration(v[2])*time.Microsecond, now, nil)
}

var errBadReply = errors.New("the rate limit script's reply is not three numbers")
