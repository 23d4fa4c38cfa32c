package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Protocols are the values of protocol, a pool's or a backend's: what
// relay speaks to a backend.
var Protocols = []string{"http/1.1", "h2", "h2c"}

// The range of grpc-status values, OK (0) to UNAUTHENTICATED (16).
const (
	MinGRPCStatus = 0
	MaxGRPCStatus = 16
)

// defaultBreakerGRPCStatuses is breaker_grpc_statuses' default: 14,
// UNAVAILABLE, what a gRPC backend answers where an HTTP one answers 503.
func defaultBreakerGRPCStatuses() []int { return []int{14} }

// BackendProtocol is what relay speaks to b, one of p's backends: its own
// protocol, else the pool's.
func (p *Pool) BackendProtocol(b Backend) string {
	if b.Protocol != "" {
		return b.Protocol
	}
	return p.Protocol
}

// checkProtocol says what is wrong with v as a protocol, or "".
func checkProtocol(v string) string {
	if slices.Contains(Protocols, v) {
		return ""
	}
	return fmt.Sprintf("%s is not one of %s%s", quote(v), strings.Join(Protocols, ", "), didYouMean(v, Protocols))
}

// protocolScheme is the scheme a backend spoken to in protocol must
// have, "" when either will do: h2 is negotiated inside TLS, h2c is
// spoken in clear text.
func protocolScheme(protocol string) string {
	switch protocol {
	case "h2":
		return "https"
	case "h2c":
		return "http"
	}
	return ""
}

// checkBackendProtocol reports a bad protocol on backend i, and a
// protocol its URL's scheme cannot carry: its own protocol's problem is
// reported on its protocol key, the pool's on its entry (the pool's
// protocol may suit its other backends), naming where the pool's
// protocol was set.
func (p *Pool) checkBackendProtocol(errs *Errors, s site, i int) {
	b := p.Backends[i]
	if b.Protocol != "" {
		if msg := checkProtocol(b.Protocol); msg != "" {
			pr := s.backendAt(i, "protocol", b.protocolLine)
			pr.Msg = msg
			errs.add(pr)
			return
		}
	} else if checkProtocol(p.Protocol) != "" || s.undecoded("protocol") {
		return // reported on the pool's key
	}
	proto := p.BackendProtocol(b)
	want := protocolScheme(proto)
	if want == "" || strings.EqualFold(b.URL.Scheme, want) {
		return
	}
	name := b.raw
	if name == "" {
		name = b.URL.String()
	}
	if b.Protocol != "" {
		pr := s.backendAt(i, "protocol", b.protocolLine)
		pr.Msg = fmt.Sprintf("protocol %s needs an %s:// backend, %s is not", proto, want, quote(name))
		errs.add(pr)
		return
	}
	from := ""
	if at := s.origin("protocol"); at.File == FlagsFile {
		from = " (" + at.Key + ")"
	} else if at.Line > 0 {
		from = fmt.Sprintf(" (%s, line %d)", at.Key, at.Line)
	}
	pr := s.backendAt(i, "url", b.Line)
	pr.Msg = fmt.Sprintf("protocol %s%s needs an %s:// backend, %s is not; give the backend an %s:// URL or a protocol of its own", proto, from, want, quote(name), want)
	errs.add(pr)
}

// decodeGRPCStatuses reads breaker_grpc_statuses: a list of grpc-status
// values, such as [14]. A bad item is reported and skipped; the pool's
// check judges the range. An empty list counts no gRPC status.
func decodeGRPCStatuses(d *decoder, p *Pool, v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, path, "must be a list of gRPC statuses (0-16) such as [14], got %s", describe(v))
		return
	}
	p.BreakerGRPCStatuses = []int{}
	for i, it := range v.Content {
		if n, ok := d.integer(resolve(it), fmt.Sprintf("%s[%d]", path, i)); ok {
			p.BreakerGRPCStatuses = append(p.BreakerGRPCStatuses, n)
		}
	}
}
