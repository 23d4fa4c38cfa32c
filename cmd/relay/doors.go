package main

import (
	"log/slog"
	"net"

	"relay/internal/acme"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/h2"
	"relay/internal/proxy"
	"relay/internal/supervisor"
	"relay/internal/tlsconf"
)

// maxConcurrentStreams caps the streams one HTTP/2 client may have open,
// as HAProxy's tune.h2.max-concurrent-streams (100) does.
const maxConcurrentStreams = 100

// doors are a serving process's client listeners: cleartext, TLS, or
// both, with the certificates the TLS one serves.
type doors struct {
	plain, tls net.Listener // nil when off
	certs      *tlsconf.Server
	log        *slog.Logger
}

// listen opens the listeners cfg asks for, for relay running alone.
func listen(cfg *config.Config, file string) (*doors, error) {
	d := &doors{}
	var err error
	if cfg.Listen != "" {
		if d.plain, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, listenFailed("listen", "listen", cfg.Listen, listenHint, file, err)
		}
	}
	if cfg.TLSListen != "" {
		if d.tls, err = net.Listen("tcp", cfg.TLSListen); err != nil {
			d.close()
			return nil, listenFailed("tls_listen", "tls_listen", cfg.TLSListen, "", file, err)
		}
	}
	return d, nil
}

func (d *doors) close() {
	for _, ln := range []net.Listener{d.plain, d.tls} {
		if ln != nil {
			ln.Close()
		}
	}
}

// open makes the front doors of c: the HTTP/1.1 proxy over it, with the
// HTTP/2 server for clients that choose HTTP/2, and for the TLS listener
// the certificates (the files' and, with certs, those relay orders) and
// the session-ticket keys of src.
func (d *doors) open(cfg *config.Config, src supervisor.ConfigSource, c *core.Core, certs *acme.Serving, log *slog.Logger) (*proxy.Proxy, error) {
	d.log = log
	front := proxy.OptionsFrom(cfg)
	front.Logger = log
	p, err := proxy.New(front, c)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		var managed tlsconf.Managed
		if certs != nil {
			managed = certs
		}
		if d.certs, err = tlsconf.NewManagedServer(cfg.TLSCertificates, cfg.TLSMinVersion, managed); err != nil {
			return nil, err
		}
		if err := d.certs.SetTicketKeys(src.TicketKeys); err != nil {
			return nil, err
		}
		if err := d.certs.SetClientAuth(cfg.ClientAuth, log); err != nil {
			return nil, err
		}
		c.SetClientVerifier(d.certs.Verified)
	}
	p.SetHTTP2(h2.NewServer(c, front.BodyTime(), h2.Limits{
		MaxConcurrentStreams: maxConcurrentStreams,
		MaxHeaderBytes:       cfg.MaxHeaderBytes,
		IdleTimeout:          cfg.IdleTimeout,
		HeaderTimeout:        cfg.ClientHeaderTimeout,
	}, log))
	return p, nil
}

// serve serves p on every open listener; each one's error, which ends
// it, comes on served.
func (d *doors) serve(p *proxy.Proxy) (served <-chan error) {
	ch := make(chan error, 2)
	if d.plain != nil {
		go func() { ch <- p.Serve(d.plain) }()
	}
	if d.tls != nil {
		go func() { ch <- p.ServeTLS(d.tls, d.certs.Config()) }()
	}
	return ch
}

// reload takes the session-ticket keys, certificates and client
// certificate rules of a reloaded configuration; certificates or rules
// whose files fail to load leave the ones in use serving (the new keys
// are taken either way).
func (d *doors) reload(next *config.Config, src supervisor.ConfigSource) error {
	if d.certs == nil {
		return nil
	}
	if err := d.certs.SetTicketKeys(src.TicketKeys); err != nil {
		return err
	}
	if err := d.certs.Reload(next.TLSCertificates, next.TLSMinVersion); err != nil {
		return err
	}
	return d.certs.SetClientAuth(next.ClientAuth, d.log)
}

// setTicketKeys takes the keys of a rotation between reloads.
func (d *doors) setTicketKeys(keys [][]byte) {
	if d.certs != nil {
		if err := d.certs.SetTicketKeys(keys); err != nil {
			d.log.Error("session-ticket keys from the supervisor refused; keeping the current ones", "err", err.Error())
		}
	}
}

// listeners are the open listeners' addresses.
func (d *doors) listeners() config.Listeners {
	var l config.Listeners
	if d.plain != nil {
		l.Listen = d.plain.Addr().String()
	}
	if d.tls != nil {
		l.TLSListen = d.tls.Addr().String()
	}
	return l
}

// addrs names the open listeners for the start line.
func (d *doors) addrs() []any {
	var kv []any
	if d.plain != nil {
		kv = append(kv, "listen", d.plain.Addr().String())
	}
	if d.tls != nil {
		kv = append(kv, "tls_listen", d.tls.Addr().String())
	}
	return kv
}
