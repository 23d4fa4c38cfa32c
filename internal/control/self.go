package control

import (
	"fmt"
	"net/url"
	"sync"

	"relay/internal/config"
	"relay/internal/supervisor"
)

// own is what the control knows of relay's own addresses, which no
// backend may be (config.SelfAddress): the configured ones first, then
// the ones relay bound, which tell the port a port 0 became.
type own struct {
	mu        sync.Mutex
	listeners config.Listeners
	check     config.SelfCheck // nil until SetListeners
}

// SetListeners lays ls over relay's own addresses as the control knows
// them (fields left "" keep what they were): the configuration's at
// start, then each listener's bound address once it listens.
func (l *Control) SetListeners(ls config.Listeners) {
	// The rule resolves listener names: made outside the lock, so a
	// question meanwhile is answered by the rule before it.
	l.own.mu.Lock()
	next := l.own.listeners.Over(ls)
	l.own.mu.Unlock()
	check := config.SelfAddress(next)
	l.own.mu.Lock()
	defer l.own.mu.Unlock()
	l.own.listeners, l.own.check = next, check
}

// Self says whether a backend URL is relay itself, one of its own
// listen, tls_listen or admin_listen addresses; msg names the backend and
// the address. It may resolve the backend's name, so it is asked outside
// the control's lock, when a member comes in: from the admin API, a
// reload, or discovery.
func (l *Control) Self(u *url.URL) (msg string, self bool) {
	l.own.mu.Lock()
	check := l.own.check
	l.own.mu.Unlock()
	if check == nil {
		return "", false
	}
	return check(u)
}

// refuseSelf is ErrInvalid naming the first of ms that is relay itself,
// or nil.
func (l *Control) refuseSelf(ms []supervisor.Member) error {
	l.own.mu.Lock()
	check := l.own.check
	l.own.mu.Unlock()
	if check == nil {
		return nil
	}
	us := make([]*url.URL, 0, len(ms))
	for _, m := range ms {
		if u, err := url.Parse(m.URL); err == nil {
			us = append(us, u) // else the change refuses it as it builds the backend
		}
	}
	for _, msg := range check.Each(us) {
		if msg != "" {
			return fmt.Errorf("%w: backend %s", ErrInvalid, msg)
		}
	}
	return nil
}
