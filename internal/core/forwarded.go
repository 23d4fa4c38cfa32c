package core

import (
	"bytes"
	"net/netip"

	"relay/internal/balance"
	"relay/internal/h1"
)

// trusts reports whether a peer is a configured trusted proxy.
func (c *Core) trusts(a netip.Addr) bool {
	for _, pfx := range c.cfg.TrustedProxies {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFields is the feature that tells a backend who the client is
// and how it reached relay: X-Forwarded-For, -Proto and -Host in the
// upstream request phase. It is on in every core.
type forwardedFields struct{ c *Core }

// ForwardedFields returns c's feature writing X-Forwarded-*.
func ForwardedFields(c *Core) Feature { return forwardedFields{c} }

// FeatureName names the feature for relay -explain.
func (forwardedFields) FeatureName() string { return "forwarded fields" }

// UpstreamHead writes the X-Forwarded-* fields (appendForwarded).
func (f forwardedFields) UpstreamHead(x *Exchange, out []byte) []byte {
	x.keepOutOfTrailers(forwardedNames)
	return x.appendForwarded(f.c, out)
}

// forwardedNames are the fields that claim who the client is, kept out of
// a request's trailers: from the client a forgery, and relay writes its
// own in the head.
const forwardedNames = "x-forwarded-for,x-forwarded-proto,x-forwarded-host,forwarded,x-real-ip,"

// appendForwarded writes X-Forwarded-For, -Proto and -Host, and marks the
// client's own copies Hop so they are not forwarded twice. It runs after
// hop-by-hop fields were marked, so a client cannot make relay drop these
// by naming them in Connection. A client's values are kept only when it is
// a trusted proxy; from anyone else they would be forgeries. The other
// fields that claim a client address, Forwarded (RFC 7239) and X-Real-IP,
// are treated alike: a trusted proxy's pass on, anyone else's are dropped,
// since a backend that reads them would believe a client's word about
// itself. relay writes only X-Forwarded-*, the form every backend
// framework reads.
func (x *Exchange) appendForwarded(c *Core, out []byte) []byte {
	fields := x.Req.Fields
	trusted := x.Peer.Trusted
	var proto, host []byte
	out = append(out, "X-Forwarded-For: "...)
	for i := range fields {
		f := &fields[i]
		switch {
		case len(f.Name) != 9 && (len(f.Name) < 15 || len(f.Name) > 17):
			continue
		case len(f.Name) == 9:
			if trusted || !(f.Is("forwarded") || f.Is("x-real-ip")) {
				continue
			}
		case f.Is("x-forwarded-for"):
			if trusted && !f.Hop && len(f.Value) > 0 {
				out = append(out, f.Value...)
				out = append(out, ", "...)
			}
		case f.Is("x-forwarded-proto"):
			if trusted && !f.Hop {
				proto = f.Value
			}
		case f.Is("x-forwarded-host"):
			if trusted && !f.Hop {
				host = f.Value
			}
		default:
			continue
		}
		f.Hop = true
	}
	out = append(out, x.Peer.Text...)
	out = append(out, '\r', '\n')
	if proto == nil {
		proto = x.Peer.Scheme()
	}
	out = h1.AppendField(out, xfProto, proto)
	if host == nil {
		host = x.Req.Host
	}
	if host != nil {
		out = h1.AppendField(out, xfHost, host)
	}
	return out
}

var (
	xfProto = []byte("X-Forwarded-Proto")
	xfHost  = []byte("X-Forwarded-Host")
)

// clientHash is a hash of the client address. Behind trusted proxies the
// client is the rightmost X-Forwarded-For entry that is not itself a
// trusted proxy; entries further left were written by parties relay
// cannot vouch for.
func (x *Exchange) clientHash(c *Core) uint64 {
	return balance.HashAddr(x.clientAddr(c))
}

func (x *Exchange) forwardedClient(c *Core) (netip.Addr, bool) {
	fields := x.Req.Fields
	for i := len(fields) - 1; i >= 0; i-- {
		if !fields[i].Is("x-forwarded-for") {
			continue
		}
		list := fields[i].Value
		for len(list) > 0 {
			var item []byte
			if j := bytes.LastIndexByte(list, ','); j >= 0 {
				item, list = bytes.TrimSpace(list[j+1:]), list[:j]
			} else {
				item, list = bytes.TrimSpace(list), nil
			}
			a, err := netip.ParseAddr(string(item))
			if err != nil {
				return netip.Addr{}, false
			}
			a = a.Unmap()
			if !c.trusts(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
