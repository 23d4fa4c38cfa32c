package acme

import (
	"context"
	"errors"
	"time"

	"github.com/caddyserver/certmagic"
	acmeapi "github.com/mholt/acmez/v3/acme"
)

// A name relay is told to manage is brought into hand here: loaded from
// storage, or ordered, one attempt at a time, until certmagic holds it
// as a managed certificate; from then on certmagic's maintenance renews
// it. relay schedules these attempts itself rather than leaving them to
// certmagic's background obtain, for two reasons:
//
//   - certmagic's first retry is a minute away and the next ones 2, 2,
//     5 and 10 minutes, all while it holds the storage's lock for the
//     name. A CA (or storage) that was down for a few seconds when
//     relay started would keep a name without a certificate for
//     minutes. relay tries again after 2, 4, 8, 16 and 30 s while
//     nothing answered, and lets go of the lock between attempts, so
//     another instance sharing the storage may take the order.
//   - certmagic's background obtain gives up at once, without a retry
//     and without an event, when storage cannot be read at the start:
//     the name would never be ordered until a restart.
//
// A CA that answered with a refusal (a problem below 500: a validation
// that failed, a rate limit) is asked again on a slow schedule, as
// Let's Encrypt allows five failed validations per name an hour.

// unreachableWaits follow an attempt that reached no answer: the CA
// could not be reached or answered what ACME is not (a 5xx problem,
// garbage), or storage failed. The last one repeats.
var unreachableWaits = []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

// refusedWaits follow an attempt the CA refused. The last one repeats.
var refusedWaits = []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour}

// firstOrders bounds how many names are loaded or ordered at once; the
// others wait their turn.
const firstOrders = 8

// refusedByCA reports whether err carries the CA's own refusal: an ACME
// problem with a status below 500.
func refusedByCA(err error) bool {
	var p acmeapi.Problem
	return errors.As(err, &p) && p.Status > 0 && p.Status < 500
}

// backoff is one name's schedule of attempts.
type backoff struct{ unreachable, refused int }

// next returns how long to wait after an attempt that failed with err.
func (b *backoff) next(err error) time.Duration {
	waits, i := unreachableWaits, &b.unreachable
	if refusedByCA(err) {
		waits, i = refusedWaits, &b.refused
	}
	w := waits[min(*i, len(waits)-1)]
	*i++
	return w
}

// bringIn loads or orders name until it is in hand, or ctx (the name's
// own, which Unmanage and Stop end) is done. It logs one line for each
// attempt that fails, with the time to the next one.
func (m *Manager) bringIn(ctx context.Context, name string) {
	defer func() {
		if ctx.Err() != nil {
			return // Unmanage cleared the mark, and a new bringIn may own it
		}
		m.mu.Lock()
		delete(m.bringing, name)
		m.mu.Unlock()
	}()
	var b backoff
	for attempt := 1; ; attempt++ {
		select {
		case m.turns <- struct{}{}:
		case <-ctx.Done():
			return
		}
		err := m.sync.ManageSync(ctx, []string{name})
		<-m.turns
		if err == nil || ctx.Err() != nil {
			return
		}
		wait := b.next(err)
		m.log.Error("ACME order failed", "name", name, "attempt", attempt, "refused_by_ca", refusedByCA(err), "retry_in", wait.String(), "err", err.Error())
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// quietIssuer is the manager's ACME issuer for the orders relay makes
// one attempt at a time (bringIn, on demand). certmagic treats such an
// order as made by someone at a terminal: without an email it prints a
// prompt to standard output and reads standard input, which a relay
// started from a shell would wait on. quietIssuer asks the same issuer
// as a background order does, which registers without an email.
// Renewals go through the manager's main config and the issuer itself,
// which tells the CA which certificate a renewal replaces (ARI).
type quietIssuer struct{ *certmagic.ACMEIssuer }

// PreCheck is the issuer's own, never interactive.
func (q quietIssuer) PreCheck(ctx context.Context, names []string, _ bool) error {
	return q.ACMEIssuer.PreCheck(ctx, names, false)
}
