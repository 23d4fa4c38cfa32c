package control

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// Errors of operator actions, for the admin API to map to statuses; the
// errors returned wrap them with what was wrong.
var (
	ErrNoBackend = errors.New("no such backend")
	ErrNoPool    = errors.New("no such pool")
	ErrInvalid   = errors.New("invalid request")
	ErrConflict  = errors.New("conflict")
)

// Find returns the name of the member of pool that name or host:port
// (http assumed) designates, or ErrNoPool or ErrNoBackend.
func (l *Control) Find(pool, name string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.knownLocked(pool) {
		return "", l.noPoolLocked(pool)
	}
	if b := l.backendLocked(pool, name); b != nil {
		return b.Name, nil
	}
	if !strings.Contains(name, "://") {
		if b := l.backendLocked(pool, "http://"+name); b != nil {
			return b.Name, nil
		}
	}
	return "", fmt.Errorf("%w %q in pool %q; GET /api/pools/%s/backends lists them", ErrNoBackend, name, pool, pool)
}

// noPoolLocked is ErrNoPool naming pool and the pools there are; l.mu is
// held.
func (l *Control) noPoolLocked(pool string) error {
	names := make([]string, len(l.pools))
	for i, p := range l.pools {
		names[i] = p.Name
	}
	return fmt.Errorf("%w %q; relay's pools: %s", ErrNoPool, pool, strings.Join(names, ", "))
}

// Drain stops new requests to a member of pool; those in flight finish.
// It shows as drained once none is left in any process.
func (l *Control) Drain(pool, name string) error {
	return l.operate(pool, name, "backend draining", func(b *backend.Backend) bool { return b.SetDraining(true) })
}

// Disable takes a member of pool out of rotation (HAProxy's maintenance).
func (l *Control) Disable(pool, name string) error {
	return l.operate(pool, name, "backend disabled", func(b *backend.Backend) bool { return b.SetDisabled(true) })
}

// Enable ends a drain or a disable of a member of pool.
func (l *Control) Enable(pool, name string) error {
	return l.operate(pool, name, "backend enabled", func(b *backend.Backend) bool {
		d, e := b.SetDraining(false), b.SetDisabled(false)
		return d || e
	})
}

// operate applies an operator action to the member named name of pool
// here and in every process, and logs it when it changed anything. Other
// pools holding the same address are left alone: an operator's state is
// the membership's.
func (l *Control) operate(pool, name, msg string, act func(*backend.Backend) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.knownLocked(pool) {
		return l.noPoolLocked(pool)
	}
	b := l.backendLocked(pool, name)
	if b == nil {
		return fmt.Errorf("%w %q in pool %q", ErrNoBackend, name, pool)
	}
	if act(b) {
		l.log.Info(msg, "backend", b.Name, "pool", pool, "by", "operator")
	}
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindOperator, Operator: operatorOf(pool, b)})
	return nil
}

// SetWeight changes the weight of a member of pool in every process.
func (l *Control) SetWeight(pool, name string, weight int) error {
	if weight < 1 || weight > config.MaxWeight {
		return fmt.Errorf("%w: weight %d is outside 1..%d; to take a backend out, drain it", ErrInvalid, weight, config.MaxWeight)
	}
	return l.change(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		if !l.knownLocked(pool) {
			return nil, l.noPoolLocked(pool)
		}
		for i := range ms {
			if ms[i].Pool == pool && ms[i].URL == name {
				l.log.Info("backend weight changed", "backend", name, "pool", pool, "weight", weight, "was", ms[i].Weight, "by", "operator")
				ms[i].Weight = weight
				return ms, nil
			}
		}
		return nil, fmt.Errorf("%w %q in pool %q", ErrNoBackend, name, pool)
	})
}

// Add adds a backend to pool in every process; it is checked at once
// and, with slow start, ramps up. It returns the backend's name. A
// backend that is relay itself (Self) is ErrInvalid.
func (l *Control) Add(pool, rawURL string, weight int) (string, error) {
	l.mu.Lock()
	if !l.knownLocked(pool) {
		defer l.mu.Unlock()
		return "", l.noPoolLocked(pool)
	}
	l.mu.Unlock()
	u, err := config.BackendURL(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: url: %v", ErrInvalid, err)
	}
	if msg, self := l.Self(u); self {
		return "", fmt.Errorf("%w: url: %s", ErrInvalid, msg)
	}
	if weight == 0 {
		weight = config.DefaultWeight
	}
	if weight < 1 || weight > config.MaxWeight {
		return "", fmt.Errorf("%w: weight %d is outside 1..%d", ErrInvalid, weight, config.MaxWeight)
	}
	name := u.String()
	err = l.change(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		for _, m := range ms {
			if m.Pool == pool && m.URL == name {
				return nil, fmt.Errorf("%w: backend %q is in pool %q already", ErrConflict, name, pool)
			}
		}
		l.log.Info("backend added", "backend", name, "pool", pool, "weight", weight, "by", "operator")
		return append(ms, supervisor.Member{Pool: pool, URL: name, Weight: weight, From: supervisor.FromAPI}), nil
	})
	return name, err
}

// Remove takes a member out of pool in every process; requests in
// flight to it finish.
func (l *Control) Remove(pool, name string) error {
	var note func()
	return l.commit(func(ms []supervisor.Member) ([]supervisor.Member, error) {
		if !l.knownLocked(pool) {
			return nil, l.noPoolLocked(pool)
		}
		for i, m := range ms {
			if m.Pool == pool && m.URL == name {
				if m.From == supervisor.FromEtcd {
					return nil, fmt.Errorf("%w: backend %q of pool %q comes from etcd key %q; delete the key to remove it (drain it to stop its traffic meanwhile)", ErrConflict, name, pool, m.Key)
				}
				rest := append(ms[:i:i], ms[i+1:]...)
				// A backend etcd announces too was left out for this
				// one; it serves again.
				next, joined := l.withDiscoveredLocked(staticOf(rest), rest)
				note = func() {
					l.log.Info("backend removed", "backend", name, "pool", pool, "by", "operator")
					joined()
				}
				return next, nil
			}
		}
		return nil, fmt.Errorf("%w %q in pool %q", ErrNoBackend, name, pool)
	}, nil, func() { note() })
}

// Reloaded makes src the configuration of every process (a process
// started later runs it too), pools relay's pools and members their
// membership; a member that is relay itself (Self) refuses the reload, and
// so does one of a pool not in pools. Members that stay (same pool and
// URL) keep their state, and addresses that stay keep theirs in every
// pool. Backends that stay keep their state:
// health, breaker, operator state, counters. prepare checks and readies
// the backends under the new configuration, in place of Prepare; adopt,
// when every check passed, runs before the steps prepare returned, so the
// caller can take the configuration with them. A refused reload changes
// nothing. It returns what the reload did to the membership, discovered
// and operator-added members included.
func (l *Control) Reloaded(src supervisor.ConfigSource, pools []PoolRules, members []supervisor.Member, prepare func(*backend.Backend) (func(), error), adopt func()) (Changes, error) {
	if err := l.checkPools(pools); err != nil {
		return Changes{}, err
	}
	// The file was checked against the addresses it names; relay still
	// listens where it started, whatever the file says now.
	if err := l.refuseSelf(members); err != nil {
		return Changes{}, err
	}
	var joined func()
	var changes Changes
	err := l.commit(func(ms []supervisor.Member) (next []supervisor.Member, err error) {
		// The new pools judge the new membership; a refused change puts
		// the old ones back.
		l.pools = pools
		next, joined = l.withDiscoveredLocked(members, ms)
		changes = changesOf(ms, next)
		return next, nil
	}, prepare, func() {
		joined()
		if adopt != nil {
			adopt()
		}
		src.TicketKeys = nextTicketKeys(l.config.TicketKeys)
		src.Instance = l.config.Instance // a reload is the same relay
		src.StickyKey = l.config.StickyKey
		l.config = src
		l.reloads[0]++
		l.broadcastLocked(supervisor.Message{Kind: supervisor.KindConfig, Config: &src})
	})
	if err != nil {
		return Changes{}, err
	}
	return changes, nil
}

// ReloadRefused counts a reload whose configuration was invalid.
func (l *Control) ReloadRefused() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reloads[1]++
}

// Reopen tells every process that the shared log file was rotated.
func (l *Control) Reopen() { l.broadcast(supervisor.Message{Kind: supervisor.KindReopen}) }

// Generation is the configuration generation relay runs.
func (l *Control) Generation() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.config.Generation
}

// change applies edit to the membership under the control's lock, builds
// the backends of the result (keeping those that stay), sends it to every
// process and hands the checks their new targets.
func (l *Control) change(edit func([]supervisor.Member) ([]supervisor.Member, error)) error {
	return l.commit(edit, nil, nil)
}

// commit is change, with prepare (nil: Prepare) checking and readying the
// backends, and then run under the control's lock once every check has
// passed, before the steps and before the membership goes out: a change
// that fails leaves nothing half done, the pools' rules included (edit
// may set them).
func (l *Control) commit(edit func([]supervisor.Member) ([]supervisor.Member, error), prepare func(*backend.Backend) (func(), error), then func()) error {
	// One change at a time from start to end, so the checks get the
	// targets of the last change, not of whichever finished last.
	l.changing.Lock()
	defer l.changing.Unlock()
	l.mu.Lock()
	pools := l.pools
	fail := func(err error) error {
		l.pools = pools
		l.mu.Unlock()
		return err
	}
	ms, err := edit(append([]supervisor.Member(nil), l.members...))
	if err != nil {
		return fail(err)
	}
	// Members are held pool by pool, in the pools' order.
	at := l.poolIndexLocked()
	for _, m := range ms {
		if _, ok := at[m.Pool]; !ok {
			return fail(fmt.Errorf("%w: backend %q names pool %q, which relay does not have", ErrInvalid, m.URL, m.Pool))
		}
	}
	slices.SortStableFunc(ms, func(a, b supervisor.Member) int { return at[a.Pool] - at[b.Pool] })
	// Every check first; then the steps, which cannot fail.
	if prepare == nil {
		prepare = l.prepare
	}
	bs := make([]*backend.Backend, len(ms))
	steps := make([]func(), len(ms))
	hosts := map[string]*backend.Host{}
	for i, m := range ms {
		b, step, err := l.memberLocked(m, hosts, prepare)
		if err != nil {
			return fail(fmt.Errorf("%w: %v", ErrInvalid, err))
		}
		bs[i], steps[i] = b, step
	}
	if then != nil {
		then()
	}
	for _, step := range steps {
		step()
	}
	l.members, l.bs, l.hosts = ms, bs, hosts
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindMembership, Membership: append([]supervisor.Member{}, ms...)})
	l.mu.Unlock()
	l.syncChecks()
	return nil
}

// memberLocked returns the backend of m and the step that gives it m's
// settings: the current member of the same pool and URL when it stays,
// its weight, request cap and TLS settings changed in place by the step
// so it keeps its health, breaker, operator state and counters; else a
// new membership, of the address's Host when another pool holds it (or
// held it before the change) so the pools share its breaker. hosts
// collects the change's Hosts by name. Nothing changes before the step
// runs.
func (l *Control) memberLocked(m supervisor.Member, hosts map[string]*backend.Host, prepare func(*backend.Backend) (func(), error)) (*backend.Backend, func(), error) {
	if b := l.backendLocked(m.Pool, m.URL); b != nil {
		if h := hosts[b.Name]; h != nil && h != b.Host {
			return nil, nil, fmt.Errorf("backend %q: two addresses of one name", b.Name)
		}
		hosts[b.Name] = b.Host
		ready, err := prepare(b)
		if err != nil {
			return nil, nil, err
		}
		return b, func() {
			ApplyMember(b, m, nil)
			ready()
		}, nil
	}
	u, err := url.Parse(m.URL)
	if err != nil {
		return nil, nil, err
	}
	h, err := backend.NewHost(u)
	if err != nil {
		return nil, nil, err
	}
	if had := hosts[h.Name]; had != nil {
		h = had
	} else if had := l.hosts[h.Name]; had != nil {
		h = had
	}
	hosts[h.Name] = h
	b, err := h.Member(m.Pool, m.Weight)
	if err != nil {
		return nil, nil, err
	}
	ApplyMember(b, m, nil)
	ready, err := prepare(b)
	if err != nil {
		return nil, nil, err
	}
	return b, ready, nil
}

// ApplyMember gives b what m says of it: its weight and its request cap,
// share turning the relay-wide cap into this process's part of it (nil:
// the whole cap). The control and every serving process apply a member
// through it, so a weight means the same everywhere.
func ApplyMember(b *backend.Backend, m supervisor.Member, share func(int) int) {
	limit := m.MaxRequests
	if share != nil {
		limit = share(limit)
	}
	b.SetMembership(m.Weight, limit)
}

func (l *Control) prepare(b *backend.Backend) (func(), error) {
	if l.Prepare == nil {
		return func() {}, nil
	}
	return l.Prepare(b)
}

// Status is relay as a whole at one moment, for the admin API, the
// dashboard and /metrics.
type Status struct {
	Generation uint64
	// Processes is how many serving processes are attached.
	Processes int
	// Pools are relay's pools in order; Members every pool's members,
	// pool by pool.
	Pools   []PoolStatus
	Members []MemberStatus
	// Stats are the counters of every process, summed (Control.Stats).
	Stats *stats.Process
	// Reloads counts reloads applied and refused.
	Reloads [2]uint64
	// Certificates are those relay ordered (ACME), and ACME what its
	// manager did; empty and nil without ACME.
	Certificates []CertificateStatus
	ACME         *ACMECounts
	Time         time.Time
}

// PoolStatus is one pool as the status shows it.
type PoolStatus struct {
	Name      string
	Algorithm string
}

// MemberStatus is one member of a pool: its configuration, its state as
// the control holds it, what its checks and its address's breaker did.
type MemberStatus struct {
	supervisor.Member
	State     backend.State
	HalfOpen  bool // its breaker's open time is over and a probe decides
	Checks    stats.CheckCounts
	Ejections uint64
}

// Status returns relay's state and counters now, collecting the
// counters from every process (bounded by ctx).
func (l *Control) Status(ctx context.Context) *Status {
	st := l.Stats(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &Status{Generation: l.config.Generation, Processes: len(l.byProc), Stats: st, Reloads: l.reloads, Time: time.Now()}
	l.acmeStatusLocked(s)
	for _, p := range l.pools {
		s.Pools = append(s.Pools, PoolStatus{Name: p.Name, Algorithm: p.Algorithm})
	}
	for i, m := range l.members {
		b := l.bs[i]
		s.Members = append(s.Members, MemberStatus{
			Member: m, State: b.State(), HalfOpen: b.Ejected() && b.EjectedUntil().IsZero(),
			Checks: b.Checks.Read(), Ejections: l.ejections[b.Name],
		})
	}
	return s
}

// InRotation counts the members that may be picked now, by pool; every
// pool is there, with 0 when none of its members may be.
func (l *Control) InRotation() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := make(map[string]int, len(l.pools))
	for _, p := range l.pools {
		n[p.Name] = 0
	}
	for i, b := range l.bs {
		if b.Available() {
			n[l.members[i].Pool]++
		}
	}
	return n
}
