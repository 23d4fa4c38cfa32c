package acme

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/certmagic"

	"relay/internal/config"
)

// OnDemand is ordering a certificate at the first handshake for a name
// relay holds none for, as Caddy's on_demand_tls (Settings.OnDemand).
// A name must pass, in order: the allow rule, the ask URL, and the
// per-minute cap on orders.
type OnDemand struct {
	// Allow are whole names and "*.REST" patterns (one label); empty
	// leaves the decision to Ask.
	Allow []string
	// Ask is asked GET Ask?domain=NAME; only a 2xx lets the order go.
	// "" asks nobody.
	Ask string
	// PerMinute caps the orders begun on demand in any minute.
	PerMinute int
	// AskTimeout bounds one ask; 0 is 5 s.
	AskTimeout time.Duration
}

// onDemandOf is the acme section's on_demand as a manager's settings.
func onDemandOf(o *config.ACMEOnDemand) *OnDemand {
	if o == nil {
		return nil
	}
	return &OnDemand{Allow: o.Allow, Ask: o.Ask, PerMinute: o.PerMinute}
}

// The bounds of on-demand issuance in the manager.
const (
	// askCalls bounds the ask requests in flight at once; a decision
	// that needs one more waits for a place.
	askCalls = 8
	// askTTL is how long an answer of the ask URL is kept, yes or no,
	// and askErrorTTL one that never came (a timeout, a refused
	// connection): a client repeating a name costs one ask in each.
	askTTL      = time.Minute
	askErrorTTL = 10 * time.Second
	// askAnswers bounds the answers kept; past it the expired ones go,
	// then any one.
	askAnswers = 4096
	// maxDeciding bounds the names decided at once; an ask for another
	// is refused at once.
	maxDeciding = 64
	// orderTimeout bounds one order on demand.
	orderTimeout = 2 * time.Minute
	// failedTTL is how long a name whose order failed is refused
	// without another order.
	failedTTL = time.Minute
	// defaultAskTimeout bounds one ask request.
	defaultAskTimeout = 5 * time.Second
)

// Refused is why a name gets no certificate on demand.
type Refused struct {
	Name   string
	Reason string
	// Key is the setting that refused it ("" for no setting: the name
	// is not one a CA issues for, or a bound was reached).
	Key string
}

func (r *Refused) Error() string {
	return fmt.Sprintf("no certificate on demand for %q: %s", r.Name, r.Reason)
}

// demand is a manager's on-demand state; its zero value is ready for
// init.
type demand struct {
	once   sync.Once
	log    *refusals
	client *http.Client
	calls  chan struct{}

	mu       sync.Mutex
	deciding map[string]*decision
	answers  map[string]answer    // the ask URL's, by name
	failed   map[string]time.Time // names whose order failed, until when they are refused
	begun    []time.Time          // orders begun within the last minute, oldest first

	asked atomic.Uint64 // ask requests made
}

// decision is one name's decision, shared by every ask for it.
type decision struct {
	done chan struct{}
	err  error
}

// answer is one answer of the ask URL, kept until until.
type answer struct {
	ok     bool
	reason string
	until  time.Time
}

func (d *demand) init(m *Manager) {
	d.once.Do(func() {
		d.log = newRefusals(m.log)
		timeout := defaultAskTimeout
		if o := m.s.OnDemand; o != nil && o.AskTimeout > 0 {
			timeout = o.AskTimeout
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil // the ask URL is the operator's own service
		d.client = &http.Client{Timeout: timeout, Transport: tr}
		d.calls = make(chan struct{}, askCalls)
		d.deciding = map[string]*decision{}
		d.answers = map[string]answer{}
		d.failed = map[string]time.Time{}
	})
}

// OnDemand gets a certificate for host on demand, if the rule admits
// it: nil once the manager holds one (published, as every certificate
// is, before OnDemand returns), else a *Refused saying why not. Asks for
// one name share one decision and one order; the decision goes on when
// ctx ends (the asker stops waiting, the order does not).
func (m *Manager) OnDemand(ctx context.Context, host string) error {
	if m.s.OnDemand == nil {
		return &Refused{Name: host, Reason: "acme.on_demand is not set", Key: "acme.on_demand"}
	}
	d := &m.od
	d.init(m)
	name := DemandName(host)
	if name == "" {
		d.log.refused(host, "not a name a CA issues a certificate for")
		return &Refused{Name: host, Reason: "not a name a CA issues a certificate for"}
	}
	if m.holds(name) {
		return nil
	}
	d.mu.Lock()
	dc := d.deciding[name]
	if dc == nil {
		if len(d.deciding) >= maxDeciding {
			d.mu.Unlock()
			r := &Refused{Name: name, Reason: fmt.Sprintf("%d names are being decided already", maxDeciding)}
			d.log.refused(name, r.Reason)
			return r
		}
		dc = &decision{done: make(chan struct{})}
		d.deciding[name] = dc
		go func() {
			dc.err = m.decide(name)
			d.mu.Lock()
			delete(d.deciding, name)
			d.mu.Unlock()
			close(dc.done)
		}()
	}
	d.mu.Unlock()
	select {
	case <-dc.done:
		return dc.err
	case <-ctx.Done():
		return &Refused{Name: name, Reason: "no decision in time: " + ctx.Err().Error()}
	}
}

// holds reports whether the manager holds a valid certificate for name.
func (m *Manager) holds(name string) bool {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if is, ok := m.held[name]; ok {
		return now.Before(is.NotAfter)
	}
	for _, is := range m.held {
		if slices.Contains(is.Names, name) && now.Before(is.NotAfter) {
			return true
		}
	}
	return false
}

// decide runs name's decision: the allow rule, the ask URL, then (for
// a name storage has no certificate for) the per-minute cap, and the
// order. A refusal is logged within the bounds of d.log.
func (m *Manager) decide(name string) error {
	err := m.obtainOnDemand(name)
	var r *Refused
	if errors.As(err, &r) {
		if r.Key != "" {
			m.od.log.refused(name, r.Reason, "key", r.Key)
		} else {
			m.od.log.refused(name, r.Reason)
		}
	}
	return err
}

func (m *Manager) obtainOnDemand(name string) error {
	o, d := m.s.OnDemand, &m.od
	if !Allows(o.Allow, name) {
		return &Refused{Name: name, Reason: "not matched by acme.on_demand.allow", Key: "acme.on_demand.allow"}
	}
	if m.Listed(name) {
		return &Refused{Name: name, Reason: "listed in acme.domains, whose certificates are ordered at start, not on demand", Key: "acme.domains"}
	}
	ctx, cancel := context.WithTimeout(m.ctx, orderTimeout)
	defer cancel()
	if o.Ask != "" {
		if err := d.ask(ctx, o.Ask, name); err != nil {
			return err
		}
	}
	d.mu.Lock()
	until, failed := d.failed[name]
	d.mu.Unlock()
	if failed && time.Now().Before(until) {
		return &Refused{Name: name, Reason: "its order failed less than " + failedTTL.String() + " ago"}
	}
	// A certificate in storage (one this instance or another ordered
	// before) is loaded, not ordered: the cap does not count it.
	stored := m.s.Storage.Exists(ctx, certmagic.StorageKeys.SiteCert(m.issuer.IssuerKey(), name))
	if !stored && !d.take(o.PerMinute) {
		return &Refused{Name: name, Reason: "acme.on_demand.per_minute (" + strconv.Itoa(o.PerMinute) + ") orders began in the last minute", Key: "acme.on_demand.per_minute"}
	}
	m.mu.Lock()
	m.managed[name] = true
	m.mu.Unlock()
	// ManageSync loads a certificate storage holds, or orders one
	// (under the storage's lock, so instances order a name once), and
	// puts it in certmagic's cache, whose maintenance renews it like
	// the others; the events publish it.
	if err := m.sync.ManageSync(ctx, []string{name}); err != nil {
		m.mu.Lock()
		delete(m.managed, name)
		m.mu.Unlock()
		d.mu.Lock()
		keep(d.failed, name, time.Now().Add(failedTTL), func(t time.Time) time.Time { return t })
		d.mu.Unlock()
		return &Refused{Name: name, Reason: "the order failed: " + err.Error()}
	}
	if !m.holds(name) {
		return &Refused{Name: name, Reason: "obtained, but no usable certificate came of it"}
	}
	m.log.Info("ACME certificate on demand", "name", name, "from_storage", stored)
	return nil
}

// take counts an order begun now, unless perMinute began in the last
// minute.
func (d *demand) take(perMinute int) bool {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	i := 0
	for i < len(d.begun) && now.Sub(d.begun[i]) >= time.Minute {
		i++
	}
	d.begun = d.begun[i:]
	if len(d.begun) >= perMinute {
		return false
	}
	d.begun = append(d.begun, now)
	return true
}

// ask asks the ask URL about name, or takes its answer kept from less
// than askTTL ago: nil is yes.
func (d *demand) ask(ctx context.Context, ask, name string) error {
	now := time.Now()
	d.mu.Lock()
	a, ok := d.answers[name]
	d.mu.Unlock()
	if !ok || !now.Before(a.until) {
		select {
		case d.calls <- struct{}{}:
		case <-ctx.Done():
			return &Refused{Name: name, Reason: "no place to ask acme.on_demand.ask in time"}
		}
		a = d.call(ctx, ask, name)
		<-d.calls
		d.mu.Lock()
		keep(d.answers, name, a, func(a answer) time.Time { return a.until })
		d.mu.Unlock()
	}
	if !a.ok {
		return &Refused{Name: name, Reason: a.reason, Key: "acme.on_demand.ask"}
	}
	return nil
}

// call makes one ask request.
func (d *demand) call(ctx context.Context, ask, name string) answer {
	d.asked.Add(1)
	u, err := url.Parse(ask)
	if err != nil {
		return answer{reason: "the ask URL does not parse: " + err.Error(), until: time.Now().Add(askErrorTTL)}
	}
	q := u.Query()
	q.Set("domain", name)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return answer{reason: err.Error(), until: time.Now().Add(askErrorTTL)}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return answer{reason: "the ask URL did not answer: " + err.Error(), until: time.Now().Add(askErrorTTL)}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return answer{reason: "the ask URL answered " + resp.Status, until: time.Now().Add(askTTL)}
	}
	return answer{ok: true, until: time.Now().Add(askTTL)}
}

// keep puts v in m under name, keeping m to askAnswers entries: when it
// is full the expired entries go, then any one.
func keep[V any](m map[string]V, name string, v V, until func(V) time.Time) {
	if _, ok := m[name]; !ok && len(m) >= askAnswers {
		now := time.Now()
		for n, old := range m {
			if !now.Before(until(old)) {
				delete(m, n)
			}
		}
		for n := range m {
			if len(m) < askAnswers {
				break
			}
			delete(m, n)
		}
	}
	m[name] = v
}

// AskCalls is how many ask requests the manager made.
func (m *Manager) AskCalls() uint64 { return m.od.asked.Load() }
