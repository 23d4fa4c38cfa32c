package discovery

import (
	"context"
	"errors"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"relay/internal/config"
)

// Register announces value under key in e's cluster until ctx ends, under
// a lease of ttl that it keeps alive: if the registering process dies,
// etcd deletes the key when the lease runs out, and every watcher drops
// the backend. When the lease is lost (etcd unreachable for longer than
// ttl) Register puts the key again under a new lease once etcd answers.
// When ctx ends it revokes the lease, so the key goes at once, and
// returns; when ctx ends with errReplaced as its cause it leaves the
// lease to run out instead.
func Register(ctx context.Context, e *config.Etcd, key string, value []byte, ttl time.Duration, log *slog.Logger) {
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			cli.Close()
		}
	}()
	wait := MinBackoff
	failing := false
	for ctx.Err() == nil {
		lease, err := func() (clientv3.LeaseID, error) {
			if cli == nil {
				// With credentials the client authenticates at once,
				// and fails while etcd is away: made again each try.
				c, err := NewClient(e)
				if err != nil {
					return 0, err
				}
				cli = c
			}
			return put(ctx, cli, e.DialTimeout, key, value, ttl)
		}()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if !failing {
				failing = true
				log.Warn("register: announcing in etcd failed; retrying", "key", key, "err", err.Error())
			}
			sleep(ctx, wait)
			wait = min(2*wait, MaxBackoff)
			continue
		}
		failing, wait = false, MinBackoff
		log.Info("register: announced in etcd", "key", key, "value", string(value), "ttl", ttl.String())
		alive, err := cli.KeepAlive(ctx, lease)
		if err == nil {
			for range alive { // the channel closes when the lease is lost or ctx ends
			}
		}
		if ctx.Err() != nil {
			if errors.Is(context.Cause(ctx), errReplaced) {
				// Another announcement holds the key now; this lease
				// runs out holding nothing.
				break
			}
			if err := revoke(cli, e.DialTimeout, lease); err != nil {
				log.Warn("register: withdrawing from etcd failed; the key goes when its lease runs out", "key", key, "ttl", ttl.String(), "err", err.Error())
			} else {
				log.Info("register: withdrawn from etcd", "key", key)
			}
			break
		}
		log.Warn("register: the lease was lost; announcing again", "key", key)
	}
}

// put writes key under a new lease of ttl and returns the lease.
func put(ctx context.Context, cli *clientv3.Client, timeout time.Duration, key string, value []byte, ttl time.Duration) (clientv3.LeaseID, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	secs := max(int64((ttl+time.Second-1)/time.Second), 1)
	g, err := cli.Grant(pctx, secs)
	if err != nil {
		return 0, err
	}
	if _, err := cli.Put(pctx, key, string(value), clientv3.WithLease(g.ID)); err != nil {
		// The put may have landed all the same (its answer lost, or
		// ctx ended on the way): the lease goes, and the key with it.
		revoke(cli, timeout, g.ID)
		return 0, err
	}
	return g.ID, nil
}

// revoke ends lease, and every key under it, within timeout, whether or
// not the caller's context has ended.
func revoke(cli *clientv3.Client, timeout time.Duration, lease clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := cli.Revoke(ctx, lease)
	return err
}

// An Announcement is a key Announce keeps in etcd.
type Announcement struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// errReplaced ends an announcement that another one of the same key
// takes over.
var errReplaced = errors.New("replaced by a new announcement")

// Announce runs Register in the background until the announcement is
// withdrawn or replaced. Not reaching etcd never stops the caller:
// Register retries and logs.
func Announce(e *config.Etcd, key string, value []byte, ttl time.Duration, log *slog.Logger) *Announcement {
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &Announcement{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		Register(ctx, e, key, value, ttl, log)
	}()
	return a
}

// Withdraw revokes the key and returns once it is gone, or once etcd has
// had its dial timeout to answer.
func (a *Announcement) Withdraw() {
	a.cancel(nil)
	<-a.done
}

// Replaced stops keeping the key without revoking it, for an announcement
// of the same key started just before: that one puts the key under its
// own lease, and the key is never missing in between.
func (a *Announcement) Replaced() {
	a.cancel(errReplaced)
	<-a.done
}
