package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"relay/internal/config"
	"relay/internal/discovery"
)

// registration is what -register and its companion flags ask for: the
// server announces itself in etcd, where relays discovering backends under
// the same prefix find it.
type registration struct {
	endpoints string // comma-separated; "" announces nothing
	prefix    string
	key       string // the name after the prefix; "" for the advertised HOST:PORT
	ttl       time.Duration
	advertise string // "" for the listen address
	weight    int
	pool      string // the relay pool the server is a backend of
}

// companions are the flags that mean something only with -register.
var companions = []string{"register-prefix", "register-key", "register-ttl", "advertise", "weight", "pool"}

func (r *registration) flags(fs *flag.FlagSet) {
	fs.StringVar(&r.endpoints, "register", "", "announce this server in etcd at these `endpoints` (comma-separated client URLs,\n"+
		"as http://127.0.0.1:2379), so relays discovering backends there find it; empty: do not")
	fs.StringVar(&r.prefix, "register-prefix", "/relay/backends/", "etcd key `prefix` relay watches (its discovery.etcd.prefix)")
	fs.StringVar(&r.key, "register-key", "", "key `name` after -register-prefix (default the advertised HOST:PORT,\n"+
		"after POOL/ when -pool is not "+config.DefaultPool+")")
	fs.DurationVar(&r.ttl, "register-ttl", config.DefaultAnnounceTTL, "`duration` of the key's lease, at least 2s: a server that dies without\n"+
		"withdrawing its key disappears from etcd this long after")
	fs.StringVar(&r.advertise, "advertise", "", "`URL` relays reach this server at (default http://HOST:PORT with the listen\n"+
		"host, 127.0.0.1 when listening on all interfaces, and the port listened on)")
	fs.IntVar(&r.weight, "weight", config.DefaultWeight, fmt.Sprintf("the weight `N` announced with -register, 1..%d", config.MaxWeight))
	fs.StringVar(&r.pool, "pool", config.DefaultPool, "the relay pool `NAME` announced with -register: relays put this server\n"+
		"in their pool of that name (1 to 64 of a-z, 0-9, _ and -)")
}

// check judges the flags before anything listens; the error names the flag
// at fault. set holds the names of the flags given.
func (r *registration) check(set map[string]bool) error {
	if r.endpoints == "" {
		for _, name := range companions {
			if set[name] {
				return fmt.Errorf("-%s: means something only with -register ENDPOINTS, which is not given", name)
			}
		}
		return nil
	}
	eps := discovery.Endpoints(r.endpoints)
	if len(eps) == 0 {
		return errors.New("-register: no endpoint; give etcd's client URLs, as in http://127.0.0.1:2379")
	}
	for _, ep := range eps {
		if msg := config.CheckEtcdEndpoint(ep); msg != "" {
			return fmt.Errorf("-register: %s", msg)
		}
	}
	if r.prefix == "" {
		return errors.New("-register-prefix: must not be empty; give the prefix relay watches, as in /relay/backends/")
	}
	if r.ttl < config.MinAnnounceTTL {
		return fmt.Errorf("-register-ttl: %v is too short; etcd's shortest lease is about %v", r.ttl, config.MinAnnounceTTL)
	}
	if r.weight < 1 || r.weight > config.MaxWeight {
		return fmt.Errorf("-weight: %d is outside 1..%d", r.weight, config.MaxWeight)
	}
	if err := config.CheckPoolName(r.pool); err != nil {
		return fmt.Errorf("-pool: %v", err)
	}
	if r.advertise != "" {
		if _, err := config.BackendURL(r.advertise); err != nil {
			return fmt.Errorf("-advertise: %v", err)
		}
	}
	return nil
}

// announcement is the key and the value that announce the server listening
// at addr. A -advertise given was judged by check, so an error here is
// about the default made from addr.
func (r *registration) announcement(addr *net.TCPAddr) (key string, value []byte, err error) {
	adv := r.advertise
	if adv == "" {
		// The host listened on, unless that is every interface: then
		// loopback, which reaches it from relays on the same machine.
		ap := addr.AddrPort()
		host := ap.Addr().Unmap()
		if host.IsUnspecified() {
			host = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		adv = "http://" + netip.AddrPortFrom(host, ap.Port()).String()
	}
	u, err := config.BackendURL(adv)
	if err != nil {
		return "", nil, fmt.Errorf("-advertise: %v (the default, from the listen address)", err)
	}
	key = discovery.PoolKeyFor(r.prefix, r.pool, u.String())
	if r.key != "" {
		key = r.prefix + r.key
	}
	return key, discovery.MarshalPool(u.String(), r.weight, r.pool), nil
}

// start announces the server in the background; the announcement is kept
// up, and put back whenever etcd lost it, until withdraw is called.
func (r *registration) start(key string, value []byte, log *slog.Logger) (withdraw func()) {
	e := &config.Etcd{
		Endpoints:   discovery.Endpoints(r.endpoints),
		Prefix:      r.prefix,
		DialTimeout: config.DefaultEtcdDialTimeout,
	}
	return discovery.Announce(e, key, value, r.ttl, log).Withdraw
}
