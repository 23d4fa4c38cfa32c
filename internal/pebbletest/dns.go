package pebbletest

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// resolver is the DNS server Pebble's VA asks for the addresses of the
// names it validates: a few lines of miekg/dns on one port of 127.0.0.1,
// over UDP and TCP (the VA itself asks over TCP).
type resolver struct {
	addr    string
	resolve func(name string) []netip.Addr

	mu       sync.Mutex
	override map[string][]netip.Addr

	servers []*dns.Server
}

// startResolver serves DNS on one port of 127.0.0.1, UDP and TCP, until t
// ends.
func startResolver(t testing.TB, resolve func(string) []netip.Addr) *resolver {
	t.Helper()
	r := &resolver{resolve: resolve, override: map[string][]netip.Addr{}}
	pc, ln := listenBoth(t)
	r.addr = ln.Addr().String()
	started := make(chan struct{}, 2)
	for _, s := range []*dns.Server{{PacketConn: pc}, {Listener: ln}} {
		s.Handler = r
		s.NotifyStartedFunc = func() { started <- struct{}{} }
		r.servers = append(r.servers, s)
		go s.ActivateAndServe()
	}
	// Shutdown of a server not yet started fails and leaves it to start
	// later, so both must be up before the test may end.
	<-started
	<-started
	t.Cleanup(func() {
		for _, s := range r.servers {
			s.Shutdown()
		}
	})
	return r
}

// listenBoth finds a port of 127.0.0.1 free for both UDP and TCP.
func listenBoth(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 50 {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatal("no port of 127.0.0.1 free for both UDP and TCP")
	return nil, nil
}

// set makes name resolve to addrs, or to nothing (NXDOMAIN) if addrs is
// empty, whatever Options.Resolve says.
func (r *resolver) set(name string, addrs []netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.override[canonical(name)] = append([]netip.Addr(nil), addrs...)
}

func (r *resolver) lookup(name string) []netip.Addr {
	name = canonical(name)
	r.mu.Lock()
	addrs, ok := r.override[name]
	r.mu.Unlock()
	if ok {
		return addrs
	}
	if r.resolve == nil {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1})}
	}
	return r.resolve(name)
}

func canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// ServeDNS answers A and AAAA questions from lookup; a name without
// addresses is NXDOMAIN, and any other question about a name that has
// addresses is answered with no records.
func (r *resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	for _, question := range q.Question {
		addrs := r.lookup(question.Name)
		if len(addrs) == 0 {
			m.Rcode = dns.RcodeNameError
			continue
		}
		hdr := dns.RR_Header{Name: question.Name, Class: dns.ClassINET, Ttl: 0}
		for _, a := range addrs {
			a = a.Unmap()
			switch {
			case question.Qtype == dns.TypeA && a.Is4():
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
			case question.Qtype == dns.TypeAAAA && a.Is6():
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
	}
	w.WriteMsg(m)
}
