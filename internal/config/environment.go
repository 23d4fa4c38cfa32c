package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// resolveTimeout bounds the listen host's lookup in CheckEnvironment.
const resolveTimeout = 3 * time.Second

// CheckEnvironment reports what the configuration names outside relay that
// would stop relay at start: a listen host that does not resolve, a
// backend that is relay itself (SelfAddress: relay's own listen,
// tls_listen or admin_listen address, which takes this machine's
// addresses and names' resolution to tell), and a log_file or
// access_log_file that cannot be written (or rotated, which renames it in
// its directory). It is separate from Validate because it asks the
// system, and its answer can change while the file does not; relay -check
// and start both run it. It creates nothing: a log file that does not
// exist yet stays that way.
func (c *Config) CheckEnvironment() error {
	var errs Errors
	if host, _, err := net.SplitHostPort(c.Listen); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
			_, err := net.DefaultResolver.LookupHost(ctx, host)
			cancel()
			if err != nil {
				p := c.at("listen")
				p.Msg = fmt.Sprintf("host %s does not resolve, so relay cannot listen on it (%v)", quote(host), err)
				errs.add(p)
			}
		}
	}
	c.checkSelf(&errs, SelfAddress(ListenersOf(c)))
	for _, f := range []struct{ key, path string }{{"log_file", c.LogFile}, {"access_log_file", c.AccessLogFile}} {
		if f.path == "" {
			continue
		}
		if err := writable(f.path); err != nil {
			p := c.at(f.key)
			p.Msg = fmt.Sprintf("cannot write %s: %v", quote(f.path), err)
			errs.add(p)
		}
	}
	return errs.err()
}

// writable checks that path can be opened for appending and that its
// directory takes new files, as rotation needs.
func writable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return errors.New("it is a directory")
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return unwrapPath(err)
		}
		f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return unwrapPath(err)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return unwrapPath(err)
	case !di.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".relay-check-*")
	if err != nil {
		return fmt.Errorf("directory %s does not take new files: %v", dir, unwrapPath(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// unwrapPath drops the operation and path from a *fs.PathError, which the
// problem names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkSelf reports every backend, of every pool, that self says is
// relay itself, at its entry.
func (c *Config) checkSelf(errs *Errors, self SelfCheck) {
	var us []*url.URL
	var where []func() Problem
	for _, np := range c.allPoolsDeclared() {
		s := c.siteOf(np)
		for i, b := range np.Backends {
			us = append(us, b.URL)
			where = append(where, func() Problem { return s.backendAt(i, "url", b.Line) })
		}
	}
	for i, msg := range self.Each(us) {
		if msg != "" {
			p := where[i]()
			p.Msg = msg
			errs.add(p)
		}
	}
}
