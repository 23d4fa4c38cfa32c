package config

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// A backend at one of relay's own addresses sends relay's requests back to
// relay: one at the client listener makes every request go round until
// descriptors or the response timeout run out, one at the admin listener
// puts the admin API and the profiler on the client port. SelfAddress is
// the one rule that says which backends are relay itself; the
// configuration file (CheckEnvironment), the admin API and discovery all
// ask it.

// Listeners are relay's own addresses, as HOST:PORT: where it takes
// clients (Listen, TLSListen) and where its admin listener is
// (AdminListen). "" is a listener that is off. Once relay listens, the
// bound addresses say more than the configured ones: a port 0 becomes the
// port the system chose.
type Listeners struct {
	Listen, TLSListen, AdminListen string
}

// ListenersOf is c's listeners as configured.
func ListenersOf(c *Config) Listeners {
	return Listeners{Listen: c.Listen, TLSListen: c.TLSListen, AdminListen: c.AdminListen}
}

// Over is l with the addresses that o gives laid over it: what relay
// bound, over what it was configured with.
func (l Listeners) Over(o Listeners) Listeners {
	if o.Listen != "" {
		l.Listen = o.Listen
	}
	if o.TLSListen != "" {
		l.TLSListen = o.TLSListen
	}
	if o.AdminListen != "" {
		l.AdminListen = o.AdminListen
	}
	return l
}

// SelfCheck says whether a backend URL reaches relay itself; when it does,
// msg names the backend and which of relay's addresses it is.
type SelfCheck func(u *url.URL) (msg string, self bool)

// ownAddr is one of relay's listeners, worked out once.
type ownAddr struct {
	key  string // the setting: listen, tls_listen, admin_listen
	addr string // as given
	port string
	any  bool         // a wildcard host: every address of this machine
	name string       // a host name as written, lower case; "" for an address
	ips  []netip.Addr // the host's addresses, resolved when it is a name
}

// SelfAddress returns the rule for l. A backend is relay itself when its
// port is the port of one of relay's listeners and its host reaches that
// listener: the same host or address; for a wildcard listener (":8080",
// "0.0.0.0:8080", "[::]:8080"), any address of this machine (loopback,
// the interfaces' addresses, the unspecified address, which connects to
// this machine); for a host name, the addresses it resolves to. Names are
// resolved (bounded by resolveTimeout) when the rule is made, for the
// listeners, and when it is asked, for a backend whose port is one of
// relay's: the rule is for configuration, the admin API and discovery,
// never the request path. A name that does not resolve is compared as
// written. The machine's interface addresses are read at each question,
// so an address added later counts.
func SelfAddress(l Listeners) SelfCheck {
	var own []ownAddr
	for _, a := range []struct{ key, addr string }{
		{"listen", l.Listen}, {"tls_listen", l.TLSListen}, {"admin_listen", l.AdminListen},
	} {
		host, port, err := net.SplitHostPort(a.addr)
		if err != nil || port == "0" || port == "" {
			continue // off, not an address, or a port not chosen yet
		}
		o := ownAddr{key: a.key, addr: a.addr, port: canonicalPort(port)}
		if ip, err := netip.ParseAddr(host); err == nil {
			ip = ip.Unmap()
			o.any = ip.IsUnspecified()
			o.ips = []netip.Addr{ip}
		} else if host == "" {
			o.any = true
		} else {
			o.name = strings.ToLower(host)
			o.ips = lookupHost(o.name)
		}
		own = append(own, o)
	}
	return func(u *url.URL) (string, bool) {
		if u == nil || len(own) == 0 {
			return "", false
		}
		host, port := splitHost(u.Host)
		if port == "" {
			port = "80"
			if strings.EqualFold(u.Scheme, "https") {
				port = "443"
			}
		}
		port = canonicalPort(port)
		b := backendHost{host: strings.ToLower(host)}
		for i := range own {
			o := &own[i]
			if o.port != port || !b.reaches(o) {
				continue
			}
			return fmt.Sprintf("%s is relay's own address (%s %s): relay would send its requests to itself",
				quote(u.String()), o.key, quote(o.addr)), true
		}
		return "", false
	}
}

// selfLookups bounds the questions Each asks at once: each may wait for
// the resolver.
const selfLookups = 16

// Each asks s about every URL of us, several at a time, so a file of many
// backends named on relay's ports waits for the slowest name, not for
// all of them in turn. It returns the message for each URL that is relay
// itself, "" for the others.
func (s SelfCheck) Each(us []*url.URL) []string {
	msgs := make([]string, len(us))
	var wg sync.WaitGroup
	sem := make(chan struct{}, selfLookups)
	for i, u := range us {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if msg, self := s(u); self {
				msgs[i] = msg
			}
		})
	}
	wg.Wait()
	return msgs
}

// backendHost is the host of the backend asked about, resolved at most
// once per question and only when a listener's port matches.
type backendHost struct {
	host     string
	resolved bool
	ips      []netip.Addr
	local    map[netip.Addr]bool // this machine's interface addresses, once read
}

// addrs is the backend host's addresses: itself when it is an address (an
// unspecified one connects to loopback), else what it resolves to.
func (b *backendHost) addrs() []netip.Addr {
	if b.resolved {
		return b.ips
	}
	b.resolved = true
	if ip, err := netip.ParseAddr(b.host); err == nil {
		ip = ip.Unmap()
		switch {
		case ip == netip.IPv4Unspecified():
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		case ip.IsUnspecified():
			ip = netip.IPv6Loopback()
		}
		b.ips = []netip.Addr{ip}
		return b.ips
	}
	b.ips = lookupHost(b.host)
	return b.ips
}

// reaches reports whether a connection to the backend host arrives at o.
func (b *backendHost) reaches(o *ownAddr) bool {
	if o.name != "" && o.name == b.host {
		return true
	}
	for _, ip := range b.addrs() {
		if o.any {
			if b.isLocal(ip) {
				return true
			}
			continue
		}
		for _, mine := range o.ips {
			if ip == mine {
				return true
			}
		}
	}
	return false
}

// isLocal reports whether ip is an address of this machine.
func (b *backendHost) isLocal(ip netip.Addr) bool {
	if ip.IsLoopback() {
		return true
	}
	if b.local == nil {
		b.local = map[netip.Addr]bool{}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					b.local[p.Addr().Unmap()] = true
				}
			}
		}
	}
	return b.local[ip.WithZone("")]
}

// lookupHost is name's addresses, unmapped; none when it does not resolve
// within resolveTimeout. "localhost" and names under it are loopback
// (RFC 6761) even where the resolver does not say so.
func lookupHost(name string) []netip.Addr {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	var ips []netip.Addr
	if err == nil {
		for _, ip := range found {
			ips = append(ips, ip.Unmap())
		}
	}
	if len(ips) == 0 && (name == "localhost" || strings.HasSuffix(name, ".localhost")) {
		ips = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	}
	return ips
}

// canonicalPort drops a port's leading zeros.
func canonicalPort(p string) string {
	if n, err := strconv.Atoi(p); err == nil {
		return strconv.Itoa(n)
	}
	return p
}
