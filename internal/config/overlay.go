package config

import (
	"net"
	"strconv"
)

// Overlay holds settings given as command-line flags. A zero field was not
// given and leaves the file's value alone; a given one wins over the file.
type Overlay struct {
	// Backends are backend URLs (-backends URL,URL), each of weight 1. When
	// given they replace the file's backends rather than adding to them.
	Backends []string
	// Port (-port) sets Port and, unless Listen is given too, the port
	// relay listens on. A listen address from the file keeps its host, so
	// listen: 127.0.0.1:9000 with -port 8081 listens on 127.0.0.1:8081.
	Port int
	// Algorithm (-algorithm, -strategy) names the balancing algorithm.
	Algorithm string
	// Listen (-listen) is the whole HOST:PORT to listen on; it wins over Port.
	Listen string
	// AdminListen (-admin-listen) is the admin listener's HOST:PORT; nil
	// leaves the file's, a pointer to "" turns the listener off.
	AdminListen *string
}

// Apply lays o over c and validates the result. On error c is left as it was
// and the *Errors names the offending flags (file "flags") as well as any
// problem left in the file.
func (c *Config) Apply(o Overlay, opts Options) error {
	n := c.clone()
	var errs Errors
	n.overlay(o, &errs)
	n.resolvePools()
	n.check(&errs, opts)
	if err := errs.err(); err != nil {
		return err
	}
	n.normalize()
	*c = *n
	return nil
}

// overlay copies the given flags into c and records which keys they now
// own, so later problems point at the flag instead of a file line.
func (c *Config) overlay(o Overlay, errs *Errors) {
	if c.flags == nil {
		c.flags = map[string]string{}
	}
	if o.Algorithm != "" {
		c.Algorithm = o.Algorithm
		c.flags["algorithm"] = "-algorithm"
	}
	if o.Port != 0 {
		c.Port = o.Port
		c.flags["port"] = "-port"
		// An out-of-range port is reported once, against -port; it is not
		// copied into Listen to be reported again.
		if o.Listen == "" && o.Port >= 1 && o.Port <= 65535 {
			port := strconv.Itoa(o.Port)
			host, _, err := net.SplitHostPort(c.Listen)
			if !c.listenSet || err != nil {
				host = ""
			}
			c.Listen = net.JoinHostPort(host, port)
		}
	}
	if o.Listen != "" {
		c.Listen, c.listenSet = o.Listen, true
		c.flags["listen"] = "-listen"
	}
	if o.AdminListen != nil {
		c.AdminListen = *o.AdminListen
		c.flags["admin_listen"] = "-admin-listen"
	}
	if len(o.Backends) > 0 {
		c.flags["backends"] = "-backends"
		c.backendProblems = 0
		c.Backends = nil
		for _, raw := range o.Backends {
			u, msg := parseBackendURL(raw)
			if msg != "" {
				errs.add(Problem{File: FlagsFile, Key: "-backends", Msg: msg})
				c.backendProblems++
				continue
			}
			c.Backends = append(c.Backends, Backend{URL: u, Weight: DefaultWeight, raw: raw})
		}
	}
}
