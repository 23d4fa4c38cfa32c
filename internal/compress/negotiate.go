package compress

import "bytes"

// starSlot is where Accept keeps the weight of "*", after the codings'.
const starSlot = numEncodings

// Accept is what a request's Accept-Encoding fields say, gathered field
// by field as the core reads the head: a weight for each coding relay
// knows and for "*". Its zero value is a request without the field; it
// holds no references to the bytes it is given and allocates nothing, so
// one lives in each reused exchange.
type Accept struct {
	present bool
	// w is 0 for a coding the fields do not name, else 1 + its q-value
	// in thousandths (1 for q=0, refused; 1001 for q=1).
	w [numEncodings + 1]uint16
}

// Reset makes a the Accept of a request without the field, for the next
// request.
func (a *Accept) Reset() { *a = Accept{} }

// Present reports whether Add was called: whether the request had an
// Accept-Encoding field, even an empty one.
func (a *Accept) Present() bool { return a.present }

// Add takes one Accept-Encoding field value; a request may carry several
// fields, which mean their values joined by commas (RFC 9110 5.3).
// Members it cannot read (malformed weights, parameters other than q,
// codings relay does not produce) are skipped, as RFC 9110 lets a
// recipient ignore what it does not understand; the others still count.
// A coding named twice keeps its higher weight: the duplicate usually
// comes from an intermediary that added its own field, and whichever of
// the two accepts it can decode it.
func (a *Accept) Add(value []byte) {
	a.present = true
	for len(value) > 0 {
		var member []byte
		if i := bytes.IndexByte(value, ','); i >= 0 {
			member, value = value[:i], value[i+1:]
		} else {
			member, value = value, nil
		}
		a.addMember(member)
	}
}

func (a *Accept) addMember(m []byte) {
	m = trimOWS(m)
	i := 0
	for i < len(m) && isTchar(m[i]) {
		i++
	}
	name, rest := m[:i], trimOWS(m[i:])
	if len(name) == 0 {
		return // empty member ("gzip,,br") or garbage
	}
	q := 1000
	if len(rest) > 0 {
		// weight = OWS ";" OWS "q=" qvalue (RFC 9110 12.4.2); nothing else
		// may follow a coding in Accept-Encoding.
		if rest[0] != ';' {
			return
		}
		rest = trimOWS(rest[1:])
		if len(rest) < 2 || (rest[0] != 'q' && rest[0] != 'Q') || rest[1] != '=' {
			return
		}
		var ok bool
		if q, ok = parseQ(rest[2:]); !ok {
			return
		}
	}
	slot := -1
	switch {
	case equalFold(name, "gzip"), equalFold(name, "x-gzip"):
		slot = int(Gzip)
	case equalFold(name, "br"):
		slot = int(Brotli)
	case equalFold(name, "zstd"):
		slot = int(Zstd)
	case equalFold(name, "identity"):
		slot = int(Identity)
	case len(name) == 1 && name[0] == '*':
		slot = starSlot
	default:
		return
	}
	if w := uint16(q + 1); w > a.w[slot] {
		a.w[slot] = w
	}
}

// parseQ reads a qvalue (RFC 9110 12.4.2): "0" to "1" with at most three
// decimals, in thousandths.
func parseQ(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 5 || (b[0] != '0' && b[0] != '1') {
		return 0, false
	}
	q := int(b[0]-'0') * 1000
	if len(b) == 1 {
		return q, true
	}
	if b[1] != '.' {
		return 0, false
	}
	scale := 100
	for _, c := range b[2:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		q += int(c-'0') * scale
		scale /= 10
	}
	if q > 1000 {
		return 0, false // 1.001 and the like
	}
	return q, true
}

// Choose picks the coding for a response to a request whose
// Accept-Encoding fields a holds, by RFC 9110 12.5.3: the coding of
// Encodings with the highest q-value above 0, where a coding not named
// takes the weight of "*" and, without "*", is not acceptable; between
// equal weights the first of Encodings, the server's order. The answer
// is Identity when the request has no Accept-Encoding (a client that
// sends none may still not decode anything: curl without --compressed),
// when it accepts none of Encodings, and when it weighs identity above
// every coding it accepts. A request that refuses identity too
// ("identity;q=0", or "*;q=0") and accepts nothing relay produces also
// gets Identity: relay then sends the body as it is rather than a 406,
// as nginx and Caddy do, since a client that cannot take the body is
// better served by trying than by an error page it cannot use either.
func (p *Policy) Choose(a *Accept) Encoding {
	if a == nil || !a.present {
		return Identity
	}
	star := a.w[starSlot]
	best, bestW := Identity, uint16(1)
	for _, e := range p.order {
		w := a.w[e]
		if w == 0 {
			w = star
		}
		if w > bestW {
			best, bestW = e, w
		}
	}
	if best == Identity {
		return Identity
	}
	// Identity counts only when weighed above the best coding: named
	// without a weight it is q=1 but still loses a tie, since a tie lets
	// the server choose and compression is why relay was asked to.
	id := a.w[Identity]
	if id == 0 {
		id = star
	}
	if id > bestW {
		return Identity
	}
	return best
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold compares an ASCII token with a lower-case name.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
