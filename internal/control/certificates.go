package control

import (
	"context"
	"time"

	"relay/internal/supervisor"
)

// The control's part in ACME: it holds the certificates the instance's
// manager published and hands them to every process, and it answers a
// process that asks for the challenge in flight for a name. The manager
// itself (internal/acme) runs beside the control; the control only
// carries what it has.

// Challenges finds the ACME challenge in flight for host, as JSON; found
// is false when there is none.
type Challenges func(ctx context.Context, host string) (data []byte, found bool, err error)

// maxAsks bounds the challenge lookups the control runs at once for all
// processes; an ask beyond it is answered "none" at once. Each lookup
// may read the shared storage.
const maxAsks = 16

// askTimeout bounds one lookup.
const askTimeout = 3 * time.Second

// SetChallenges makes find the way the control answers processes' asks
// for challenges; before it is set every ask is answered "none".
func (l *Control) SetChallenges(find Challenges) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.challenges = find
	if l.asks == nil {
		l.asks = make(chan struct{}, maxAsks)
	}
}

// PublishCertificate sends c to every process, in place of any
// certificate it had for c's first name, and keeps it for processes that
// attach later.
func (l *Control) PublishCertificate(c supervisor.Certificate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.certs == nil {
		l.certs = map[string]supervisor.Certificate{}
	}
	l.certs[c.Names[0]] = c
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindCertificate, Certificate: &c})
}

// certificatesLocked are the messages that give a process every
// certificate held; l.mu is held.
func (l *Control) certificatesLocked() []supervisor.Message {
	ms := make([]supervisor.Message, 0, len(l.certs))
	for _, c := range l.certs {
		c := c
		ms = append(ms, supervisor.Message{Kind: supervisor.KindCertificate, Certificate: &c})
	}
	return ms
}

// asked answers process i's ask over lk, in the background and bounded
// by maxAsks.
func (l *Control) asked(i int, lk *link, ask *supervisor.Challenge) {
	l.mu.Lock()
	find, asks := l.challenges, l.asks
	l.mu.Unlock()
	answer := supervisor.Challenge{ID: ask.ID, Host: ask.Host}
	reply := func() {
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
	if find == nil {
		reply()
		return
	}
	select {
	case asks <- struct{}{}:
	default:
		l.log.Warn("too many ACME challenge lookups at once; answering none", "host", ask.Host)
		reply()
		return
	}
	go func() {
		defer func() { <-asks }()
		ctx, cancel := context.WithTimeout(context.Background(), askTimeout)
		defer cancel()
		data, found, err := find(ctx, ask.Host)
		if err != nil {
			l.log.Error("looking up an ACME challenge", "host", ask.Host, "err", err)
		}
		answer.Found, answer.Data = found && err == nil, data
		reply()
	}()
}
