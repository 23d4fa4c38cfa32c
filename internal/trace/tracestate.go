package trace

import "bytes"

// Limits of W3C Trace Context on tracestate.
const (
	// MaxTraceStateMembers is the most list-members a tracestate holds.
	MaxTraceStateMembers = 32
	// MaxTraceStateLen is the longest tracestate relay passes on: what
	// W3C Trace Context asks a vendor to propagate at least, and lets it
	// truncate to, whole entries at a time.
	MaxTraceStateLen = maxTraceState
	// largeMember is the length past which an entry goes first when a
	// tracestate must be truncated.
	largeMember = 128
	// maxKeyLen and maxValueLen bound a list-member's key and value.
	maxKeyLen   = 256
	maxValueLen = 256
)

// TraceState gathers a request's tracestate fields, which mean their
// values joined by commas (RFC 9110 5.3), and checks them by W3C Trace
// Context: every list-member a key of lower-case letters, digits and
// _-*/@ (up to 256, starting with a letter or digit), "=", and a value
// of printable ASCII but "," and "=" (up to 256, not ending in a space);
// at most 32 of them; empty members and the spaces and tabs around
// members are allowed and dropped. One member that breaks a rule, or a
// 33rd, makes the whole tracestate invalid, and relay then sends none,
// as the specification's test suite expects of a vendor that validates.
// A key given twice keeps its first, left-most entry, the most recent
// position in its trace graph.
//
// It keeps views of the bytes it was given, no copy, and allocates
// nothing: Append writes the result while those bytes are still the
// request's. Its zero value is an empty tracestate. Add stops reading
// once the value is invalid, so a hostile field costs one pass over it
// at most.
type TraceState struct {
	members [MaxTraceStateMembers][]byte
	keys    [MaxTraceStateMembers]int // the length of each member's key
	n       int
	// count is the members given, duplicates included, which the limit
	// of 32 is on.
	count   int
	invalid bool
}

// Reset empties s and lets go of the bytes it viewed.
func (s *TraceState) Reset() { *s = TraceState{} }

// Valid reports whether every member s was given so far is well formed
// and there are at most 32 of them.
func (s *TraceState) Valid() bool { return !s.invalid }

// Len is the number of distinct members s holds.
func (s *TraceState) Len() int { return s.n }

// Add takes one tracestate field value.
func (s *TraceState) Add(v []byte) {
	for len(v) > 0 && !s.invalid {
		var m []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			m, v = v[:i], v[i+1:]
		} else {
			m, v = v, nil
		}
		s.addMember(bytes.Trim(m, " \t"))
	}
}

func (s *TraceState) addMember(m []byte) {
	if len(m) == 0 {
		return // an empty member, or only whitespace
	}
	eq := bytes.IndexByte(m, '=')
	if eq < 0 || !validKey(m[:eq]) || !validValue(m[eq+1:]) {
		s.invalid = true
		return
	}
	if s.count == MaxTraceStateMembers {
		s.invalid = true
		return
	}
	s.count++
	for i := range s.n {
		if s.keys[i] == eq && bytes.Equal(s.members[i][:eq], m[:eq]) {
			return // the key again: its first entry stands
		}
	}
	s.members[s.n], s.keys[s.n] = m, eq
	s.n++
}

// Append appends the tracestate to pass on to dst: the members joined
// by commas, none when s is invalid or empty. One longer than
// MaxTraceStateLen is truncated by whole entries, as W3C Trace Context
// says: entries over 128 characters go first, from the right, then
// entries from the right.
func (s *TraceState) Append(dst []byte) []byte {
	if s.invalid || s.n == 0 {
		return dst
	}
	var drop [MaxTraceStateMembers]bool
	total := s.n - 1 // the commas
	for i := range s.n {
		total += len(s.members[i])
	}
	for i := s.n - 1; i >= 0 && total > MaxTraceStateLen; i-- {
		if len(s.members[i]) > largeMember {
			drop[i] = true
			total -= len(s.members[i]) + 1
		}
	}
	for i := s.n - 1; i >= 0 && total > MaxTraceStateLen; i-- {
		if !drop[i] {
			drop[i] = true
			total -= len(s.members[i]) + 1
		}
	}
	first := true
	for i := range s.n {
		if drop[i] {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		dst, first = append(dst, s.members[i]...), false
	}
	return dst
}

// validKey reports whether k is a tracestate key: a lower-case letter or
// a digit, then up to 255 of those and _-*/@.
func validKey(k []byte) bool {
	if len(k) == 0 || len(k) > maxKeyLen || !isLCAlphaDigit(k[0]) {
		return false
	}
	for _, c := range k[1:] {
		if !isLCAlphaDigit(c) && c != '_' && c != '-' && c != '*' && c != '/' && c != '@' {
			return false
		}
	}
	return true
}

func isLCAlphaDigit(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// validValue reports whether v is a tracestate value: 1 to 256 printable
// ASCII characters but ',' and '=', the last not a space.
func validValue(v []byte) bool {
	if len(v) == 0 || len(v) > maxValueLen || v[len(v)-1] == ' ' {
		return false
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}
