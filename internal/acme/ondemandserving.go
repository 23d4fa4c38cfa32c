package acme

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Demand is a serving process's side of on-demand issuance. A handshake
// for a name relay has no certificate for, that is a name a CA issues
// for and that the allow rule admits, asks the control for a
// certificate and waits, bounded, for its answer; the certificate itself
// comes down as every certificate does (KindCertificate, into Served),
// before the answer, on the same channel.
type Demand struct {
	served *Served
	allow  []string
	ask    func(id uint64, host string) error
	wait   time.Duration
	log    *refusals

	mu     sync.Mutex
	next   uint64
	byName map[string]*pending
	byID   map[uint64]*pending
}

// pending is one ask in flight, which every handshake for its name
// waits on.
type pending struct {
	id     uint64
	name   string
	done   chan struct{}
	issued bool
	reason string
	timer  *time.Timer // ends the wait when no answer comes
}

// maxDemands bounds the names one process asks the control about at
// once; a handshake for another fails at once (handshakes for a name in
// flight wait for its answer).
const maxDemands = 32

// DemandWait is the longest a handshake waits for a certificate on
// demand; relay waits at most client_header_timeout, within which the
// handshake must end anyway.
const DemandWait = 20 * time.Second

// NewDemand returns the process side of on-demand issuance beside s:
// certificates are looked for in s's Served, names are judged by allow
// (as Allows), ask sends an ask up the channel, whose answer comes back
// through Answer, and a handshake waits at most wait (DemandWait when 0
// or longer). The CA's TLS-ALPN-01 handshakes for the names allow admits
// are answered by s from then on; call it before the listener serves.
func NewDemand(s *Serving, allow []string, wait time.Duration, ask func(id uint64, host string) error, log *slog.Logger) *Demand {
	if wait <= 0 || wait > DemandWait {
		wait = DemandWait
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Demand{served: &s.Served, allow: allow, ask: ask, wait: wait, log: newRefusals(log),
		byName: map[string]*pending{}, byID: map[uint64]*pending{}}
	s.also = d.admits
	return d
}

// admits reports whether name is one relay may order on demand, as far
// as the process can judge: a name a CA issues for, under allow.
func (d *Demand) admits(name string) bool {
	name = DemandName(name)
	return name != "" && Allows(d.allow, name)
}

// Certificate is the certificate for hello's name, obtained on demand,
// or nil when there is none to be had (the handshake then gets what a
// name relay has nothing for gets: the first file's certificate, or a
// failure).
func (d *Demand) Certificate(hello *tls.ClientHelloInfo) *tls.Certificate {
	if hello.ServerName == "" {
		return nil
	}
	name := DemandName(hello.ServerName)
	if name == "" {
		d.log.refused(hello.ServerName, "not a name a CA issues a certificate for")
		return nil
	}
	if !Allows(d.allow, name) {
		d.log.refused(name, "not matched by acme.on_demand.allow", "key", "acme.on_demand.allow")
		return nil
	}
	if c := d.served.Certificate(name); c != nil {
		return c
	}
	p, err := d.pending(name)
	if err != nil {
		d.log.refused(name, err.Error())
		return nil
	}
	select {
	case <-p.done:
	case <-hello.Context().Done():
		return nil
	}
	if !p.issued {
		return nil
	}
	return d.served.Certificate(name)
}

// pending returns the ask in flight for name, or sends one.
func (d *Demand) pending(name string) (*pending, error) {
	d.mu.Lock()
	if p := d.byName[name]; p != nil {
		d.mu.Unlock()
		return p, nil
	}
	if len(d.byName) >= maxDemands {
		d.mu.Unlock()
		return nil, fmt.Errorf("%d names are being asked for already in this process", maxDemands)
	}
	d.next++
	p := &pending{id: d.next, name: name, done: make(chan struct{})}
	d.byName[name] = p
	d.byID[p.id] = p
	// An answer that never comes (the control restarting) frees the
	// place after the wait.
	p.timer = time.AfterFunc(d.wait, func() { d.finish(p, false, "no answer from the control within "+d.wait.String()) })
	d.mu.Unlock()
	if err := d.ask(p.id, name); err != nil {
		d.finish(p, false, err.Error())
		return nil, errors.New("asking the control: " + err.Error())
	}
	return p, nil
}

// finish ends p with the answer, unless it has ended.
func (d *Demand) finish(p *pending, issued bool, reason string) {
	d.mu.Lock()
	if d.byID[p.id] != p {
		d.mu.Unlock()
		return
	}
	delete(d.byID, p.id)
	delete(d.byName, p.name)
	p.issued, p.reason = issued, reason
	p.timer.Stop()
	d.mu.Unlock()
	close(p.done)
}

// Answer takes the control's answer to ask id: issued says a
// certificate was published for the name, else reason says why not.
func (d *Demand) Answer(id uint64, issued bool, reason string) {
	d.mu.Lock()
	p := d.byID[id]
	d.mu.Unlock()
	if p != nil {
		d.finish(p, issued, reason)
	}
}

// InFlight is how many names this process is asking about.
func (d *Demand) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.byName)
}
