package certstore

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// EtcdOptions say where in etcd a store keeps its keys.
type EtcdOptions struct {
	// Prefix is the prefix of every key the store writes; "" means
	// "/relay/certs/". Values are under Prefix+"data/", the times they
	// were stored under Prefix+"mtime/", and locks under Prefix+"locks/".
	Prefix string
	// Lease is how long a lock outlives its holder at most; 0 means
	// DefaultLease. etcd leases are whole seconds: it is rounded up.
	Lease time.Duration
}

// Etcd is a certmagic.Storage in etcd. Each lock is a
// concurrency.Mutex on a session of its own, whose lease the client
// keeps alive: a holder that dies, or loses etcd for a lease period,
// frees the lock.
type Etcd struct {
	cli   *clientv3.Client
	data  string
	mtime string
	locks string
	ttl   int
	local localLocks

	mu   sync.Mutex
	held map[string]*etcdLock
}

type etcdLock struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

var (
	_ certmagic.Storage          = (*Etcd)(nil)
	_ certmagic.TryLocker        = (*Etcd)(nil)
	_ certmagic.LockLeaseRenewer = (*Etcd)(nil)
)

// NewEtcd is a store over cli, which the caller closes after the store's
// last use.
func NewEtcd(cli *clientv3.Client, o EtcdOptions) *Etcd {
	p := o.Prefix
	if p == "" {
		p = "/relay/certs/"
	}
	lease := o.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	return &Etcd{
		cli: cli, data: p + "data/", mtime: p + "mtime/", locks: p + "locks/",
		ttl:  int(math.Ceil(lease.Seconds())),
		held: map[string]*etcdLock{},
	}
}

// Store puts value at key.
func (s *Etcd) Store(ctx context.Context, key string, value []byte) error {
	key = cleanKey(key)
	if err := checkValue(key, value); err != nil {
		return err
	}
	now := strconv.FormatInt(time.Now().UnixNano(), 10)
	_, err := s.cli.Txn(ctx).Then(
		clientv3.OpPut(s.data+key, string(value)),
		clientv3.OpPut(s.mtime+key, now),
	).Commit()
	if err != nil {
		return fmt.Errorf("certstore: etcd: storing %q: %w", key, err)
	}
	return nil
}

// Load is the value at key.
func (s *Etcd) Load(ctx context.Context, key string) ([]byte, error) {
	key = cleanKey(key)
	r, err := s.cli.Get(ctx, s.data+key)
	if err != nil {
		return nil, fmt.Errorf("certstore: etcd: loading %q: %w", key, err)
	}
	if len(r.Kvs) == 0 {
		return nil, fmt.Errorf("certstore: loading %q: %w", key, fs.ErrNotExist)
	}
	return r.Kvs[0].Value, nil
}

// Delete removes key and every key under it.
func (s *Etcd) Delete(ctx context.Context, key string) error {
	key = cleanKey(key)
	ops := []clientv3.Op{
		clientv3.OpDelete(s.data+under(key), clientv3.WithPrefix()),
		clientv3.OpDelete(s.mtime+under(key), clientv3.WithPrefix()),
	}
	if key != "" {
		ops = append(ops, clientv3.OpDelete(s.data+key), clientv3.OpDelete(s.mtime+key))
	}
	if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("certstore: etcd: deleting %q: %w", key, err)
	}
	return nil
}

// Exists says whether key is a file or a directory.
func (s *Etcd) Exists(ctx context.Context, key string) bool {
	file, dir, _, err := s.look(ctx, cleanKey(key), false)
	return err == nil && (file != nil || dir)
}

// look reads key's value (when withValue), or only whether it exists,
// and whether keys are stored under it, in one transaction.
func (s *Etcd) look(ctx context.Context, key string, withValue bool) (file *clientv3.GetResponse, dir bool, mtime *clientv3.GetResponse, err error) {
	getFile := clientv3.OpGet(s.data+key, clientv3.WithCountOnly())
	if withValue {
		getFile = clientv3.OpGet(s.data + key)
	}
	r, err := s.cli.Txn(ctx).Then(
		getFile,
		clientv3.OpGet(s.data+under(key), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
		clientv3.OpGet(s.mtime+key),
	).Commit()
	if err != nil {
		return nil, false, nil, err
	}
	f := r.Responses[0].GetResponseRange()
	d := r.Responses[1].GetResponseRange()
	m := r.Responses[2].GetResponseRange()
	if key == "" {
		f.Count = 0
	}
	if f.Count > 0 {
		file = (*clientv3.GetResponse)(f)
	}
	return file, len(d.Kvs) > 0, (*clientv3.GetResponse)(m), nil
}

// List is the children of dir, or everything below it when recursive.
func (s *Etcd) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = cleanKey(dir)
	r, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.data+under(dir), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(s.data+dir, clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("certstore: etcd: listing %q: %w", dir, err)
	}
	kvs := r.Responses[0].GetResponseRange().Kvs
	isFile := dir != "" && r.Responses[1].GetResponseRange().Count > 0
	if len(kvs) == 0 && !isFile {
		return nil, fmt.Errorf("certstore: listing %q: %w", dir, fs.ErrNotExist)
	}
	files := make([]string, len(kvs))
	for i, kv := range kvs {
		files[i] = string(kv.Key[len(s.data):])
	}
	return listOf(dir, files, recursive), nil
}

// Stat is what is known about key.
func (s *Etcd) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = cleanKey(key)
	file, dir, mtime, err := s.look(ctx, key, true)
	if err != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: etcd: stat %q: %w", key, err)
	}
	switch {
	case file != nil:
		ki := certmagic.KeyInfo{Key: key, IsTerminal: true, Size: int64(len(file.Kvs[0].Value))}
		if len(mtime.Kvs) > 0 {
			if ns, err := strconv.ParseInt(string(mtime.Kvs[0].Value), 10, 64); err == nil {
				ki.Modified = time.Unix(0, ns)
			}
		}
		return ki, nil
	case dir || key == "":
		return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
	}
	return certmagic.KeyInfo{}, fmt.Errorf("certstore: stat %q: %w", key, fs.ErrNotExist)
}

// Lock waits until this store holds name, or ctx is done.
func (s *Etcd) Lock(ctx context.Context, name string) error {
	if err := s.local.acquire(ctx, name); err != nil {
		return err
	}
	l, err := s.session(ctx, name)
	if err == nil {
		if err = l.mutex.Lock(ctx); err == nil {
			s.hold(name, l)
			return nil
		}
		l.session.Close()
	}
	s.local.release(name)
	return fmt.Errorf("certstore: etcd: locking %q: %w", name, err)
}

// TryLock takes name if no one holds it.
func (s *Etcd) TryLock(ctx context.Context, name string) (bool, error) {
	if !s.local.tryAcquire(name) {
		return false, nil
	}
	l, err := s.session(ctx, name)
	if err == nil {
		if err = l.mutex.TryLock(ctx); err == nil {
			s.hold(name, l)
			return true, nil
		}
		l.session.Close()
	}
	s.local.release(name)
	if err == concurrency.ErrLocked {
		return false, nil
	}
	return false, fmt.Errorf("certstore: etcd: locking %q: %w", name, err)
}

// session is a new session of one lease, granted within ctx, and a mutex
// for name on it.
func (s *Etcd) session(ctx context.Context, name string) (*etcdLock, error) {
	g, err := s.cli.Grant(ctx, int64(s.ttl))
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(g.ID), concurrency.WithTTL(s.ttl))
	if err != nil {
		s.cli.Revoke(context.WithoutCancel(ctx), g.ID)
		return nil, err
	}
	return &etcdLock{session: sess, mutex: concurrency.NewMutex(sess, s.locks+name)}, nil
}

func (s *Etcd) hold(name string, l *etcdLock) {
	s.mu.Lock()
	s.held[name] = l
	s.mu.Unlock()
}

// Unlock frees name, which this store holds.
func (s *Etcd) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	l := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("certstore: etcd: unlocking %q: %w", name, ErrNotLocked)
	}
	defer s.local.release(name)
	err := l.mutex.Unlock(ctx)
	// Closing the session revokes its lease, which deletes the lock key
	// even when the Unlock above failed.
	if cerr := l.session.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("certstore: etcd: unlocking %q: %w", name, err)
	}
	return nil
}

// RenewLockLease keeps the lease of lockKey, which this store holds,
// alive now, and fails when the lease is gone. The session renews it by
// itself every third of the lease for as long as the holder lives, so
// leaseDuration (certmagic asks for minutes) is not used: a lease that
// long would keep a dead holder's lock for minutes.
func (s *Etcd) RenewLockLease(ctx context.Context, lockKey string, leaseDuration time.Duration) error {
	s.mu.Lock()
	l := s.held[lockKey]
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("certstore: etcd: renewing %q: %w", lockKey, ErrNotLocked)
	}
	select {
	case <-l.session.Done():
		return fmt.Errorf("certstore: etcd: renewing %q: session expired: %w", lockKey, ErrNotLocked)
	default:
	}
	if _, err := s.cli.KeepAliveOnce(ctx, l.session.Lease()); err != nil {
		return fmt.Errorf("certstore: etcd: renewing %q: %w", lockKey, err)
	}
	return nil
}
