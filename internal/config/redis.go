package config

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Redis is where rate limits with store: redis keep their buckets, so
// that relay instances sharing it enforce one limit. Its settings take
// effect when relay starts.
type Redis struct {
	// Address is the server's HOST:PORT.
	Address string
	// Username and Password authenticate (AUTH); both may be empty.
	Username string
	Password string
	// DB is the database number.
	DB int
	// Timeout is the longest a request waits for Redis; past it, the
	// limit answers as its on_store_error says.
	Timeout time.Duration
	// Prefix starts every key relay writes.
	Prefix string
}

// Defaults of the redis section.
const (
	DefaultRedisTimeout = 50 * time.Millisecond
	DefaultRedisPrefix  = "relay:"
	// MinRedisTimeout is the shortest wait that can see an answer: a
	// round trip takes tens of microseconds on a loopback, and a pause of
	// the scheduler or the collector a good part of a millisecond, so a
	// shorter timeout would find Redis down when it is not.
	MinRedisTimeout = time.Millisecond
	// MaxRedisTimeout bounds the wait a request may spend on Redis.
	MaxRedisTimeout = 10 * time.Second
)

var redisKeys = []string{"address", "username", "password", "db", "timeout", "prefix"}

// decodeRedis reads the redis section and judges each setting where its
// line is known.
func decodeRedis(d *decoder, c *Config, v *yaml.Node) {
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, "redis", "must be a mapping such as {address: 127.0.0.1:6379}, got %s", describe(v))
		return
	}
	const at = "redis."
	r := &Redis{Timeout: DefaultRedisTimeout, Prefix: DefaultRedisPrefix}
	addressSet := false
	d.mapping(v, at, redisKeys, func(key string, k, val *yaml.Node) {
		path := at + key
		switch key {
		case "address":
			if s, ok := d.str(val, path); ok {
				addressSet = true
				r.Address = s
				if msg := checkListen(s); msg != "" || s == "" || s[0] == ':' || portZero(s) {
					switch {
					case msg != "":
					case s == "" || s[0] == ':':
						msg = fmt.Sprintf("%s needs a host: HOST:PORT, for example 127.0.0.1:6379", quote(s))
					default:
						// A listener's port 0 asks for any free port;
						// a server's cannot be dialled.
						msg = fmt.Sprintf("port 0 in %s is no server's port: give Redis's, for example 6379", quote(s))
					}
					d.problem(val.Line, path, "%s", msg)
				}
			}
		case "username", "password", "prefix":
			if s, ok := d.str(val, path); ok {
				*map[string]*string{"username": &r.Username, "password": &r.Password, "prefix": &r.Prefix}[key] = s
			}
			if key == "prefix" && r.Prefix == "" {
				d.problem(val.Line, path, "must not be empty: relay's keys would mix with every other key in the database")
			}
		case "db":
			if n, ok := d.integer(val, path); ok {
				r.DB = n
				if n < 0 {
					d.problem(val.Line, path, "must not be negative, got %d", n)
				}
			}
		case "timeout":
			if t, ok := d.duration(val, path); ok {
				r.Timeout = t
				if t < MinRedisTimeout || t > MaxRedisTimeout {
					d.problem(val.Line, path, "must be at least %v and at most %v, got %v", MinRedisTimeout, MaxRedisTimeout, t)
				}
			}
		}
	})
	if !addressSet {
		d.problem(v.Line, at+"address", "missing: the Redis server's HOST:PORT, for example 127.0.0.1:6379")
	}
	c.Redis = r
}

// portZero reports whether HOST:PORT s has port 0, which a listener
// takes as any free port and a client cannot dial.
func portZero(s string) bool {
	_, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n == 0
}

// checkStores reports every rate limit kept in Redis when the file has no
// redis section to say where Redis is.
func (c *Config) checkStores(errs *Errors) {
	if c.Redis != nil {
		return
	}
	check := func(r *RateLimit, at string) {
		if r != nil && r.Store == RateLimitRedis {
			errs.add(Problem{File: c.Path, Line: r.Line, Key: at + ".store",
				Msg: "is redis but the file has no redis section saying where Redis is (redis: {address: 127.0.0.1:6379})"})
		}
	}
	check(c.RateLimit, "rate_limit")
	for _, name := range c.PoolNames {
		if p := c.Pools[name]; p != nil && p.RateLimit != c.RateLimit {
			check(p.RateLimit, "pools."+name+".rate_limit")
		}
	}
	for i, r := range c.Routes {
		check(r.RateLimit, fmt.Sprintf("routes[%d].rate_limit", i))
	}
}
