package acme

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"relay/internal/logging"
)

// DemandName is name as on-demand issuance judges it: lower case,
// without a trailing dot, and "" when it is no name a CA issues a
// certificate for by http-01 or tls-alpn-01 (an address, a wildcard, a
// name without a dot, a label that is not letters, digits and inner
// hyphens, or longer than DNS allows). It is checked in the serving
// process before anything is asked of the control, and again there.
func DemandName(name string) string {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if len(name) == 0 || len(name) > 253 || net.ParseIP(name) != nil || !strings.Contains(name, ".") {
		return ""
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return ""
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return ""
			}
		}
	}
	// A top-level label of digits alone would make the name look like
	// an address to some parsers; no public suffix is one.
	tld := name[strings.LastIndexByte(name, '.')+1:]
	if strings.Trim(tld, "0123456789") == "" {
		return ""
	}
	return name
}

// Allows reports whether the allow rule admits name (as DemandName
// returns it): a pattern that is the name itself, or "*.REST" where name
// is one label followed by ".REST". An empty rule admits every name (the
// ask URL then decides alone).
func Allows(allow []string, name string) bool {
	if len(allow) == 0 {
		return true
	}
	_, parent, _ := strings.Cut(name, ".")
	for _, p := range allow {
		if p == name {
			return true
		}
		if rest, ok := strings.CutPrefix(p, "*."); ok && rest == parent {
			return true
		}
	}
	return false
}

// refusals logs on-demand refusals with bounds a client cannot push: a
// name at most once per refusalEvery, and at most refusalLines lines a
// minute whatever the names (the next line written says how many were
// dropped). It remembers at most refusalNames names.
type refusals struct {
	log  *logging.Limited
	mu   sync.Mutex
	seen map[string]time.Time
}

const (
	refusalEvery = 10 * time.Minute
	refusalLines = 10
	refusalNames = 1024
)

func newRefusals(log *slog.Logger) *refusals {
	return &refusals{log: logging.NewLimited(log, refusalLines, time.Minute), seen: map[string]time.Time{}}
}

// refused logs that name was refused a certificate, unless it was
// logged within refusalEvery.
func (r *refusals) refused(name, reason string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	if t, ok := r.seen[name]; ok && now.Sub(t) < refusalEvery {
		r.mu.Unlock()
		return
	}
	if len(r.seen) >= refusalNames {
		for n, t := range r.seen {
			if now.Sub(t) >= refusalEvery {
				delete(r.seen, n)
			}
		}
		if len(r.seen) >= refusalNames {
			clear(r.seen)
		}
	}
	r.seen[name] = now
	r.mu.Unlock()
	r.log.Log(slog.LevelInfo, "no certificate on demand (a name is logged once per 10 min, at most 10 lines a minute)",
		append([]any{"name", name, "reason", reason}, args...)...)
}
