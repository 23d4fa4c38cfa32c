package control

import (
	"context"
	"slices"
	"strings"
	"time"

	"relay/internal/supervisor"
)

// The control's part in ACME: it holds the certificates the instance's
// manager published and hands them to every process, and it answers a
// process that asks for the challenge in flight for a name. The manager
// itself (internal/acme) runs beside the control; the control only
// carries what it has.

// ACME is the instance's ACME manager as the control sees it.
type ACME interface {
	// Challenge finds the challenge in flight for host, as JSON; found
	// is false when there is none.
	Challenge(ctx context.Context, host string) (data []byte, found bool, err error)
	// Counts are the orders begun, certificates obtained and orders
	// failed so far.
	Counts() ACMECounts
}

// ACMECounts are what the ACME manager did so far.
type ACMECounts struct{ Orders, Obtained, Failures uint64 }

// CertificateStatus is a certificate relay ordered: its names and when
// it expires.
type CertificateStatus struct {
	Names    []string
	NotAfter time.Time
}

// maxAsks bounds the challenge lookups the control runs at once for all
// processes; an ask beyond it is answered "none" at once. Each lookup
// may read the shared storage.
const maxAsks = 16

// askTimeout bounds one lookup.
const askTimeout = 3 * time.Second

// SetACME makes a the manager whose challenges answer processes' asks
// and whose counts the status carries; before it is set every ask is
// answered "none".
func (l *Control) SetACME(a ACME) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acme = a
	if l.asks == nil {
		l.asks = make(chan struct{}, maxAsks)
	}
}

// PublishCertificate sends c to every process, in place of any
// certificate it had for c's first name, and keeps it for processes that
// attach later.
func (l *Control) PublishCertificate(c supervisor.Certificate, notAfter time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.certs == nil {
		l.certs = map[string]heldCertificate{}
	}
	l.certs[c.Names[0]] = heldCertificate{c, notAfter}
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindCertificate, Certificate: &c})
}

// WithdrawCertificates forgets the certificates whose first name is one
// of names (names a reload took out of acme.domains): a process that
// attaches later is not given them, and the status no longer shows
// them. The processes stop serving them as they apply the reload.
func (l *Control) WithdrawCertificates(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		delete(l.certs, n)
	}
}

// certificatesLocked are the messages that give a process every
// certificate held; l.mu is held.
func (l *Control) certificatesLocked() []supervisor.Message {
	ms := make([]supervisor.Message, 0, len(l.certs))
	for _, h := range l.certs {
		c := h.Certificate
		ms = append(ms, supervisor.Message{Kind: supervisor.KindCertificate, Certificate: &c})
	}
	return ms
}

// heldCertificate is a published certificate and its expiry.
type heldCertificate struct {
	supervisor.Certificate
	notAfter time.Time
}

// acmeStatusLocked fills s with the certificates held, sorted by first
// name, and the manager's counts; l.mu is held.
func (l *Control) acmeStatusLocked(s *Status) {
	if l.acme == nil {
		return
	}
	counts := l.acme.Counts()
	s.ACME = &counts
	for _, h := range l.certs {
		s.Certificates = append(s.Certificates, CertificateStatus{Names: h.Names, NotAfter: h.notAfter})
	}
	slices.SortFunc(s.Certificates, func(a, b CertificateStatus) int { return strings.Compare(a.Names[0], b.Names[0]) })
}

// asked answers process i's ask over lk, in the background. Lookups of
// one host are shared: an ask for a host being looked up waits for that
// lookup's answer, so a client repeating handshakes for a name costs one
// storage read at a time. At most maxAsks hosts are looked up at once;
// an ask beyond them is answered "none" at once.
func (l *Control) asked(i int, lk *link, ask *supervisor.Challenge) {
	reply := func(found bool, data []byte) {
		answer := supervisor.Challenge{ID: ask.ID, Host: ask.Host, Found: found, Data: data}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.byProc[i] != lk {
			return
		}
		select {
		case lk.queue <- supervisor.Message{Kind: supervisor.KindChallenge, Challenge: &answer}:
		default:
		}
	}
	l.mu.Lock()
	a := l.acme
	if a == nil {
		l.mu.Unlock()
		reply(false, nil)
		return
	}
	if waiting, ok := l.looking[ask.Host]; ok {
		l.looking[ask.Host] = append(waiting, reply)
		l.mu.Unlock()
		return
	}
	select {
	case l.asks <- struct{}{}:
	default:
		warn := time.Since(l.asksWarned) > 10*time.Second
		if warn {
			l.asksWarned = time.Now()
		}
		l.mu.Unlock()
		if warn {
			l.log.Warn("too many ACME challenge lookups at once; answering none (logged once per 10 s)", "host", ask.Host)
		}
		reply(false, nil)
		return
	}
	if l.looking == nil {
		l.looking = map[string][]func(bool, []byte){}
	}
	l.looking[ask.Host] = []func(bool, []byte){reply}
	l.mu.Unlock()
	go func() {
		defer func() { <-l.asks }()
		ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
		defer cancel()
		data, found, err := a.Challenge(ctx, ask.Host)
		if err != nil {
			l.log.Error("looking up an ACME challenge", "host", ask.Host, "err", err)
		}
		l.mu.Lock()
		replies := l.looking[ask.Host]
		delete(l.looking, ask.Host)
		l.mu.Unlock()
		for _, r := range replies {
			r(found && err == nil, data)
		}
	}()
}
