package proxy

import (
	"bytes"
	"net/netip"

	"relay/internal/balance"
	"relay/internal/h1"
)

// trusts reports whether a peer is a configured trusted proxy.
func (p *Proxy) trusts(a netip.Addr) bool {
	for _, pfx := range p.cfg.TrustedProxies {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// appendForwarded writes X-Forwarded-For, -Proto and -Host, and marks the
// client's own copies Hop so they are not forwarded twice. It runs after
// hop-by-hop fields were marked, so a client cannot make relay drop these
// by naming them in Connection. A client's values are kept only when it is
// a trusted proxy; from anyone else they would be forgeries.
func (cc *clientConn) appendForwarded(out []byte) []byte {
	fields := cc.req.Fields
	var proto, host []byte
	out = append(out, "X-Forwarded-For: "...)
	for i := range fields {
		f := &fields[i]
		switch {
		case len(f.Name) < 15 || len(f.Name) > 17 || (f.Name[0]|0x20) != 'x':
			continue
		case f.Is("x-forwarded-for"):
			if cc.trusted && !f.Hop && len(f.Value) > 0 {
				out = append(out, f.Value...)
				out = append(out, ", "...)
			}
		case f.Is("x-forwarded-proto"):
			if cc.trusted && !f.Hop {
				proto = f.Value
			}
		case f.Is("x-forwarded-host"):
			if cc.trusted && !f.Hop {
				host = f.Value
			}
		default:
			continue
		}
		f.Hop = true
	}
	out = append(out, cc.peerIP...)
	out = append(out, '\r', '\n')
	if proto == nil {
		proto = httpProto
	}
	out = h1.AppendField(out, xfProto, proto)
	if host == nil {
		host = cc.req.Host
	}
	if host != nil {
		out = h1.AppendField(out, xfHost, host)
	}
	return out
}

var (
	httpProto = []byte("http")
	xfProto   = []byte("X-Forwarded-Proto")
	xfHost    = []byte("X-Forwarded-Host")
)

// hashKey is the ip-hash key of the request: a hash of the client address.
// Behind trusted proxies the client is the rightmost X-Forwarded-For entry
// that is not itself a trusted proxy; entries further left were written by
// parties relay cannot vouch for.
func (cc *clientConn) hashKey() uint64 {
	addr := cc.peer.Addr()
	if cc.trusted {
		if a, ok := cc.forwardedClient(); ok {
			addr = a
		}
	}
	return balance.HashAddr(addr)
}

func (cc *clientConn) forwardedClient() (netip.Addr, bool) {
	fields := cc.req.Fields
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
			if !cc.p.trusts(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
