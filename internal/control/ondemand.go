package control

import (
	"context"
	"errors"
	"time"

	"relay/internal/supervisor"
)

// The control's part in certificates on demand: a process that has no
// certificate for a name asks (KindOnDemand up); the manager decides and,
// if it obtains one, publishes it down every channel as every
// certificate is; then the asking process gets its answer, on its own
// channel, after the certificate.

// OnDemandACME is an ACME manager that orders certificates on demand.
type OnDemandACME interface {
	// OnDemand returns nil once a certificate for host is published,
	// else why there is none. Asks for one host share one decision.
	OnDemand(ctx context.Context, host string) error
}

// demandWait bounds how long the control waits for a decision before it
// answers "no": the process waits at most as long for its answer
// (acme.DemandWait).
const demandWait = 20 * time.Second

// demanded answers process i's ask for a certificate on demand over lk,
// in the background. The goroutines it starts are bounded by the
// processes' own bound on their asks in flight (32 names each), and the
// manager bounds the names it decides at once.
func (l *Control) demanded(i int, lk *link, ask *supervisor.OnDemand) {
	reply := func(err error) {
		answer := supervisor.OnDemand{ID: ask.ID, Host: ask.Host, Issued: err == nil}
		if err != nil {
			answer.Reason = err.Error()
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.byProc[i] != lk {
			return
		}
		select {
		case lk.queue <- supervisor.Message{Kind: supervisor.KindOnDemand, OnDemand: &answer}:
		default:
		}
	}
	l.mu.Lock()
	a, _ := l.acme.(OnDemandACME)
	l.mu.Unlock()
	if a == nil {
		reply(errNoOnDemand)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), demandWait)
		defer cancel()
		reply(a.OnDemand(ctx, ask.Host))
	}()
}

var errNoOnDemand = errors.New("relay orders no certificate on demand")
