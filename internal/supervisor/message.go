package supervisor

import (
	"errors"
	"fmt"

	"relay/internal/stats"
)

// Kind names what a Message carries.
type Kind string

// Messages down, from the supervisor to a serving process, and up.
const (
	// KindConfig (down, first on every channel): the configuration the
	// process must run.
	KindConfig Kind = "config"
	// KindMembership (down): every pool's backends.
	KindMembership Kind = "membership"
	// KindHealth (down): active-check results; the first one a process
	// gets is a snapshot of every backend.
	KindHealth Kind = "health"
	// KindOperator (down): an operator's state for one backend of a
	// pool.
	KindOperator Kind = "operator"
	// KindReopen (down): the shared log file was rotated; reopen it.
	KindReopen Kind = "reopen"
	// KindTickets (down): new TLS session-ticket keys (tickets.go).
	KindTickets Kind = "tickets"
	// KindCollect (down): send your counters now, answering with the
	// message's Collect number.
	KindCollect Kind = "collect"
	// KindCounters (up): a process's counters, every second and in answer
	// to a collect (Collect then says which), numbered by Reading.
	KindCounters Kind = "counters"
	// KindBreaker (up and down): an address's circuit breaker opened or
	// closed in one process; the control decides and sends its verdict to
	// every process, so every process ejects and restores the address
	// together, in every pool that holds it.
	KindBreaker Kind = "breaker"
	// KindCertificate (down): a certificate the control's ACME manager
	// has in hand, for every process to serve (in place of any it had
	// for the same names); a process that attaches gets every one.
	KindCertificate Kind = "certificate"
	// KindChallenge (up and down): a process asks for the ACME challenge
	// in flight for a name, and the control answers that process alone,
	// with the same ID.
	KindChallenge Kind = "challenge"
	// KindOnDemand (up and down): a process asks for a certificate on
	// demand for a name it has none for, and the control answers that
	// process alone, with the same ID, once it has published the
	// certificate (down every channel, before the answer) or refused.
	KindOnDemand Kind = "on_demand"
)

// Message is one message on the channel between the supervisor and a
// serving process. Kind says which one field is set.
type Message struct {
	Kind       Kind           `json:"kind"`
	Config     *ConfigSource  `json:"config,omitempty"`
	Membership []Member       `json:"membership,omitempty"`
	Health     *HealthUpdate  `json:"health,omitempty"`
	Operator   *OperatorState `json:"operator,omitempty"`
	Counters   *stats.Process `json:"counters,omitempty"`
	Breaker    *BreakerState  `json:"breaker,omitempty"`
	Tickets    [][]byte       `json:"tickets,omitempty"`
	// Certificate and Challenge are ACME's (KindCertificate,
	// KindChallenge).
	Certificate *Certificate `json:"certificate,omitempty"`
	Challenge   *Challenge   `json:"challenge,omitempty"`
	OnDemand    *OnDemand    `json:"on_demand,omitempty"`
	// Collect numbers a collect and the counters that answer it.
	Collect uint64 `json:"collect,omitempty"`
	// Reading numbers a process's readings of its counters, in the order
	// they were read, so the control keeps the latest whatever order
	// collect answers and reports arrive in.
	Reading uint64 `json:"reading,omitempty"`
}

// Certificate is a certificate and its key, as PEM, and the names it
// serves.
type Certificate struct {
	Names []string `json:"names"`
	Chain []byte   `json:"chain"`
	Key   []byte   `json:"key"`
}

// Challenge asks for, or answers with, the ACME challenge in flight for
// Host. In an answer Found says whether there is one, and Data is the
// challenge as the ACME library writes it (JSON).
type Challenge struct {
	ID    uint64 `json:"id"`
	Host  string `json:"host"`
	Found bool   `json:"found,omitempty"`
	Data  []byte `json:"data,omitempty"`
}

// OnDemand asks for, or answers about, a certificate on demand for
// Host. In an answer Issued says whether one was published, and Reason
// why not.
type OnDemand struct {
	ID     uint64 `json:"id"`
	Host   string `json:"host"`
	Issued bool   `json:"issued,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// maxDemandHost bounds an on-demand message's host: a DNS name has at
// most 253 characters.
const maxDemandHost = 253

// BreakerState is an address's circuit breaker as one process left it. The
// breaker is the address's (backend.Host), so a verdict applies to every
// pool that holds it.
type BreakerState struct {
	// Name is the address (backend.Host.Name).
	Name string `json:"name"`
	// Pool is the pool whose request tripped or closed the breaker: the
	// control judges max_ejected_percent over that pool's members. In a
	// verdict it is the pool reported.
	Pool string `json:"pool,omitempty"`
	// Until is when the ejection ends, in Unix nanoseconds; 0 means the
	// breaker closed.
	Until int64 `json:"until"`
	// Trips counts the openings since the last success, which the next
	// open time doubles from.
	Trips int `json:"trips"`
	// Reason says why it changed, for the one log line of the change.
	Reason string `json:"reason,omitempty"`
}

// ConfigSource is a configuration as the supervisor loaded it: the file's
// bytes and name (or the built-in demo configuration), which a process
// parses with its own command-line flags laid over it. A process started
// or restarted later runs exactly what the supervisor loaded, even if the
// file has been edited since.
type ConfigSource struct {
	// Generation counts the configurations the supervisor has loaded,
	// from 1.
	Generation uint64 `json:"generation"`
	Name       string `json:"name"`
	Data       []byte `json:"data"`
	// TicketKeys are the TLS session-ticket keys every process uses,
	// newest first (see tickets.go); the control sets them.
	TicketKeys [][]byte `json:"ticket_keys,omitempty"`
	// Instance is relay's instance id, the same in every process of one
	// relay and for its whole life: its Via entry carries it, so a
	// request that comes back through any of them is known (instance.go).
	// The control sets it.
	Instance string `json:"instance,omitempty"`
	// StickyKey is the HMAC key of sticky-session cookies for pools whose
	// sticky section sets no key: made once for relay's life, the same in
	// every process, so a cookie one process set is honoured by the
	// others and after a reload. The control sets it.
	StickyKey []byte `json:"sticky_key,omitempty"`
}

// Member is one backend of a pool.
type Member struct {
	// Pool names the pool; never "" (the file's top level is the pool
	// named "default").
	Pool        string `json:"pool"`
	URL         string `json:"url"`
	Weight      int    `json:"weight"`
	MaxRequests int    `json:"max_requests,omitempty"`
	// From says where the member came from: "" for the configuration
	// file (or flags), FromAPI, FromEtcd.
	From string `json:"from,omitempty"`
	// Key is the etcd key a discovered member came from.
	Key string `json:"key,omitempty"`
}

// Where members come from besides the configuration file.
const (
	FromAPI  = "api"
	FromEtcd = "etcd"
)

// Source names where m came from: "file", "api" or "etcd".
func (m Member) Source() string {
	if m.From == "" {
		return "file"
	}
	return m.From
}

// HealthUpdate carries active-check states by pool and backend name.
type HealthUpdate struct {
	// Snapshot marks the state of every backend, sent when a process
	// attaches, as opposed to one transition.
	Snapshot bool            `json:"snapshot,omitempty"`
	Backends []BackendHealth `json:"backends"`
}

// BackendHealth is one backend's active-check state in one pool: pools
// that check an address alike share one check and its verdict, pools that
// check it differently (another health_check) each have their own.
type BackendHealth struct {
	Pool string `json:"pool"`
	Name string `json:"name"`
	Up   bool   `json:"up"`
}

// OperatorState is what an operator set for one backend of a pool.
// Weights travel with the membership, which they are part of.
type OperatorState struct {
	Pool     string `json:"pool"`
	Name     string `json:"name"`
	Draining bool   `json:"draining"`
	Disabled bool   `json:"disabled"`
}

// validate reports what is wrong with a message received, naming it.
func (m *Message) validate() error {
	set := 0
	for _, present := range []bool{m.Config != nil, m.Membership != nil, m.Health != nil, m.Operator != nil, m.Counters != nil, m.Breaker != nil, m.Tickets != nil, m.Certificate != nil, m.Challenge != nil, m.OnDemand != nil} {
		if present {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("%q message carries more than one payload", m.Kind)
	}
	switch m.Kind {
	case KindConfig:
		if m.Config == nil {
			return errors.New(`"config" message without its configuration`)
		}
		if err := checkTicketKeys(m.Config.TicketKeys); err != nil {
			return fmt.Errorf(`"config" message: %w`, err)
		}
	case KindTickets:
		if len(m.Tickets) == 0 {
			return errors.New(`"tickets" message without keys`)
		}
		if err := checkTicketKeys(m.Tickets); err != nil {
			return fmt.Errorf(`"tickets" message: %w`, err)
		}
	case KindMembership:
		for i, mb := range m.Membership {
			if mb.URL == "" || mb.Weight < 1 {
				return fmt.Errorf(`"membership" message: member %d has URL %q and weight %d`, i, mb.URL, mb.Weight)
			}
			if mb.Pool == "" {
				return fmt.Errorf(`"membership" message: member %d (%s) names no pool`, i, mb.URL)
			}
		}
	case KindHealth:
		if m.Health == nil {
			return errors.New(`"health" message without backends`)
		}
		for i, b := range m.Health.Backends {
			if b.Name == "" || b.Pool == "" {
				return fmt.Errorf(`"health" message: backend %d has name %q in pool %q; both must be given`, i, b.Name, b.Pool)
			}
		}
	case KindOperator:
		if m.Operator == nil || m.Operator.Name == "" || m.Operator.Pool == "" {
			return errors.New(`"operator" message without a pool and a backend name`)
		}
	case KindReopen:
	case KindCollect:
		if m.Collect == 0 {
			return errors.New(`"collect" message without its number`)
		}
	case KindCounters:
		if m.Counters == nil {
			return errors.New(`"counters" message without counters`)
		}
	case KindBreaker:
		if m.Breaker == nil || m.Breaker.Name == "" {
			return errors.New(`"breaker" message without a backend name`)
		}
		if m.Breaker.Until < 0 || m.Breaker.Trips < 0 {
			return fmt.Errorf(`"breaker" message: until %d and trips %d must not be negative`, m.Breaker.Until, m.Breaker.Trips)
		}
	case KindCertificate:
		if c := m.Certificate; c == nil || len(c.Names) == 0 || len(c.Chain) == 0 || len(c.Key) == 0 {
			return errors.New(`"certificate" message without its names, chain and key`)
		}
	case KindChallenge:
		if c := m.Challenge; c == nil || c.ID == 0 || c.Host == "" {
			return errors.New(`"challenge" message without its ID and host`)
		}
	case KindOnDemand:
		if o := m.OnDemand; o == nil || o.ID == 0 || o.Host == "" {
			return errors.New(`"on_demand" message without its ID and host`)
		}
		if len(m.OnDemand.Host) > maxDemandHost {
			return fmt.Errorf(`"on_demand" message: host of %d bytes, longer than a DNS name (%d)`, len(m.OnDemand.Host), maxDemandHost)
		}
	default:
		return fmt.Errorf("unknown message kind %q", m.Kind)
	}
	return nil
}

// TicketKeyLen is the length of a session-ticket key (crypto/tls's).
const TicketKeyLen = 32

// checkTicketKeys reports a session-ticket key of the wrong length, without
// showing any key.
func checkTicketKeys(keys [][]byte) error {
	for i, k := range keys {
		if len(k) != TicketKeyLen {
			return fmt.Errorf("session-ticket key %d has %d bytes, want %d", i, len(k), TicketKeyLen)
		}
	}
	return nil
}
