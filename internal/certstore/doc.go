// Package certstore keeps the certificates, keys and ACME account data of
// certmagic (github.com/caddyserver/certmagic) in etcd or in Redis, so
// every relay instance serves the same certificates and exactly one of
// them orders each name.
//
// Both stores implement certmagic.Storage, certmagic.TryLocker and
// certmagic.LockLeaseRenewer with the same contract:
//
//   - Keys are paths with "/" between their parts and no leading or
//     trailing slash ("certificates/acme-v02/example.com/example.com.crt");
//     slashes at either end are trimmed. A key is a file when a value is
//     stored at it, and a directory when values are stored under it.
//   - Load, Stat and List of a key that is neither give fs.ErrNotExist.
//     Delete removes the key and everything under it; a missing key is
//     not an error.
//   - List returns the children of a directory (List("", ...) those of
//     the root); recursive, it returns every file and directory below,
//     as certmagic's FileStorage does.
//   - Stat gives the size and the time of the last Store of a file;
//     certmagic picks the newest account by it.
//   - A value is at most MaxValueSize bytes: certmagic stores
//     certificates, keys and metadata of a few KiB, and a larger value is
//     a mistake, refused with an error naming the key.
//   - Locks are leases. Lock blocks until the lock is held or ctx is
//     done; the holder keeps the lease alive while it lives, and a holder
//     that dies (its process, its connection) frees the lock within one
//     lease period. Unlock must come from the Storage value that locked;
//     goroutines of one process sharing a Storage value also exclude each
//     other, so a name is held once in the whole cluster.
package certstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaxValueSize is the largest value a store accepts.
const MaxValueSize = 1 << 20

// DefaultLease is the lock lease when the options give none: long enough
// that a loaded store or a short network stall does not lose a lock,
// short enough that a dead holder's order is taken over soon.
const DefaultLease = 15 * time.Second

// ErrTooLarge is wrapped by the error of a Store whose value exceeds
// MaxValueSize.
var ErrTooLarge = errors.New("value too large")

// ErrNotLocked is wrapped by the error of an Unlock or RenewLockLease of a
// name this Storage value does not hold.
var ErrNotLocked = errors.New("lock not held")

// cleanKey is key without slashes at its ends.
func cleanKey(key string) string { return strings.Trim(key, "/") }

// checkValue refuses a value over MaxValueSize.
func checkValue(key string, value []byte) error {
	if len(value) > MaxValueSize {
		return fmt.Errorf("certstore: storing %q: %d bytes, more than %d: %w", key, len(value), MaxValueSize, ErrTooLarge)
	}
	return nil
}

// under is the prefix of the keys below dir ("" for the root).
func under(dir string) string {
	if dir == "" {
		return ""
	}
	return dir + "/"
}

// listOf is what List(dir, recursive) returns given the files at or below
// dir, sorted: the directories and files below it, or only its children.
func listOf(dir string, files []string, recursive bool) []string {
	p := under(dir)
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, f := range files {
		if !strings.HasPrefix(f, p) || f == dir {
			continue
		}
		rest := f[len(p):]
		if !recursive {
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				rest = rest[:i]
			}
			add(p + rest)
			continue
		}
		for i := 0; i < len(rest); i++ {
			if rest[i] == '/' {
				add(p + rest[:i])
			}
		}
		add(f)
	}
	sort.Strings(out)
	return out
}

// localLocks excludes the goroutines of one process from a name, before
// the store's lock excludes other processes.
type localLocks struct {
	mu    sync.Mutex
	names map[string]*localLock
}

type localLock struct {
	sem  chan struct{}
	refs int
}

func (l *localLocks) get(name string) *localLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		l.names = map[string]*localLock{}
	}
	e := l.names[name]
	if e == nil {
		e = &localLock{sem: make(chan struct{}, 1)}
		l.names[name] = e
	}
	e.refs++
	return e
}

func (l *localLocks) put(name string, e *localLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.names, name)
	}
}

// acquire waits until no other goroutine holds name here, or ctx is done.
func (l *localLocks) acquire(ctx context.Context, name string) error {
	e := l.get(name)
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		l.put(name, e)
		return ctx.Err()
	}
}

// tryAcquire takes name here if no other goroutine holds it.
func (l *localLocks) tryAcquire(name string) bool {
	e := l.get(name)
	select {
	case e.sem <- struct{}{}:
		return true
	default:
		l.put(name, e)
		return false
	}
}

// release frees name for the other goroutines here.
func (l *localLocks) release(name string) {
	l.mu.Lock()
	e := l.names[name]
	l.mu.Unlock()
	if e == nil {
		return
	}
	<-e.sem
	l.put(name, e)
}
