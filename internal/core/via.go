package core

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Via (RFC 9110 section 7.6.3). relay adds its entry to every request it
// forwards: the protocol the client spoke ("1.0", "1.1", "2") and relay's
// pseudonym, "relay-" and the instance id (Config.Instance), after the
// entries of the proxies before it, in one Via field. A request that
// arrives with relay's own pseudonym in its Via has been through this
// relay already: a backend, or something behind one, sends it back, and
// forwarding it again would go round until descriptors or the response
// timeout run out. The core answers it 508 Loop Detected without
// forwarding it. Responses get no Via entry, as nginx's and HAProxy's do
// not by default: the loop is found on the way out, and a client has no
// use for relay's id.
//
// The request path pays for this only where there is Via: the scan for
// relay's pseudonym runs over the Via fields a request came with, found
// by name length first, and the entry is appended to the upstream head
// in place.

// via is relay's Via entries, made once.
type via struct {
	pseudonym          []byte // "relay-" + instance id
	http10, http11, h2 []byte // "1.0 relay-ID", "1.1 relay-ID", "2 relay-ID"
}

func newVia(instance string) via {
	if instance == "" {
		// A core made without a supervisor (tests, embedding) is an
		// instance of its own.
		b := make([]byte, 8)
		rand.Read(b)
		instance = hex.EncodeToString(b)
	}
	p := "relay-" + instance
	return via{pseudonym: []byte(p), http10: []byte("1.0 " + p), http11: []byte("1.1 " + p), h2: []byte("2 " + p)}
}

// entry is relay's Via entry for a request the client sent in proto
// (Exchange.Proto).
func (v *via) entry(proto string) []byte {
	switch proto {
	case "HTTP/1.0":
		return v.http10
	case "HTTP/2.0":
		return v.h2
	}
	return v.http11
}

// carries reports whether a Via field value holds relay's pseudonym as a
// received-by: after whitespace (the received-protocol before it) and
// before whitespace (a comment), a comma or the end.
func (v *via) carries(list []byte) bool {
	for {
		i := bytes.Index(list, v.pseudonym)
		if i < 0 {
			return false
		}
		end := i + len(v.pseudonym)
		if i > 0 && (list[i-1] == ' ' || list[i-1] == '\t') &&
			(end == len(list) || list[end] == ' ' || list[end] == '\t' || list[end] == ',') {
			return true
		}
		list = list[end:]
	}
}

// loopCheck is relay's Via entry on every request it forwards, and the
// check that refuses a request carrying it already (508): a backend, or
// something behind one, that sends relay's requests back to it would
// otherwise make every request go round until descriptors ran out.
type loopCheck struct{ c *Core }

// viaSlot holds whether a request came with Via fields, found by Admit
// and used by UpstreamHead.
var viaSlot = NewSlot()

func (loopCheck) FeatureName() string { return "via and loop check" }

// Admit answers 508 when one of x's Via fields, forwarded or marked
// hop-by-hop, carries relay's pseudonym: x has passed through this relay
// before.
func (l loopCheck) Admit(x *Exchange, _ time.Time) (Outcome, bool) {
	carried := SlotState[bool](x, viaSlot)
	*carried = false
	fields := x.Req.Fields
	for i := range fields {
		f := &fields[i]
		if len(f.Name) != 3 || !f.Is("via") {
			continue
		}
		*carried = true
		if l.c.via.carries(f.Value) {
			return l.c.loop(x), true
		}
	}
	return Outcome{}, false
}

// UpstreamHead writes the Via field: the client's entries (those not
// hop-by-hop), then relay's. The client's fields are marked Hop so they
// are not written again.
func (l loopCheck) UpstreamHead(x *Exchange, out []byte) []byte {
	x.keepOutOfTrailers("via,")
	out = append(out, "Via: "...)
	if *SlotState[bool](x, viaSlot) {
		fields := x.Req.Fields
		for i := range fields {
			f := &fields[i]
			if len(f.Name) != 3 || !f.Is("via") {
				continue
			}
			if !f.Hop && len(f.Value) > 0 {
				out = append(out, f.Value...)
				out = append(out, ", "...)
			}
			f.Hop = true
		}
	}
	out = append(out, l.c.via.entry(x.Proto)...)
	return append(out, '\r', '\n')
}

// loop answers a request that came back to relay: 508, and a log line
// at most every 10 s (Core.loopLog): while a loop is configured every
// request that comes round is one, and each is counted and in the access
// log already.
func (c *Core) loop(x *Exchange) Outcome {
	c.loopLog.Warn("request loop: a request came back to relay carrying relay's own Via entry; answered 508 without forwarding it. A backend, or something behind one, sends relay's requests back to it",
		"client", x.Peer.Addr.Addr().String(), "method", string(x.Req.Method))
	return c.refuse(x, 508, "the request has passed through this relay already (Via)")
}
