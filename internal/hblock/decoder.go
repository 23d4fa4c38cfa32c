package hblock

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// The decoder turns one connection's header blocks into fields (RFC 7541).
//
// Most of what decoding costs is the literal strings: each is copied out
// of the frame, many Huffman-decoded on the way. A field the peer indexed
// comes back from the dynamic table for nothing, but a peer does not
// index everything: nghttp2 never indexes :path or content-length, and
// many clients send the same user-agent or authorization as a literal
// with every request. Such a string comes as the same bytes in the same
// place of block after block, so the decoder remembers, for each of the
// first strings of the last block, the bytes it came as and the string
// they made: bytes equal to those in the same place are not decoded
// again, and cost a comparison rather than a copy.

// What the decoder remembers: the first memoStrings literal strings of
// the last block, each up to memoBytes long on the wire.
const (
	memoStrings = 32
	memoBytes   = 128
)

var (
	errNeedMore     = errors.New("hpack: block cut inside a field") // within a block: wait for the next fragment
	errStringLength = errors.New("hpack: string longer than the header list may be")
	errInteger      = errors.New("hpack: integer too large")
	errTruncated    = errors.New("hpack: header block ended inside a field")
)

// checks is what the Reader's checks find of a field's strings: whether
// its name is a valid regular field name and its value a valid value.
// A field the tables hold, or a string the decoder remembers, is
// checked once, not at every use.
type checks struct{ name, value bool }

// str is a decoded string, with what it is valid as.
type str struct {
	s             string
	asName, asVal bool
}

func newStr(s string) str { return str{s, validName(s), httpguts.ValidHeaderFieldValue(s)} }

// tableField is a field of the dynamic table and its checks.
type tableField struct {
	hpack.HeaderField
	checks
}

// staticChecks are the static table's checks: every value is valid, and
// every name but the pseudo-fields' a valid regular name.
var staticChecks = func() (c [len(static)]checks) {
	for i, st := range static {
		c[i] = checks{validName(st.name), httpguts.ValidHeaderFieldValue(st.value)}
	}
	return c
}()

// remembered is a string of the last block: the bytes it came as, and
// what they decoded to.
type remembered struct {
	huff bool
	wire []byte
	str
	ok bool
}

type decoder struct {
	ents []tableField // the dynamic table, oldest first
	size uint32       // the table's size (RFC 7541 4.1)
	max  uint32       // its maximum, as the peer last set it

	// State of the block being decoded.
	carry    []byte // the start of a field the last fragment cut
	sawField bool   // a field came: no table size update may follow
	maxStr   int    // the longest string the block may hold
	nstr     int    // literal strings read so far
	skip     bool   // the fields are not wanted: decode only what the table needs
	carried  int64  // bytes copied into the carry, over the decoder's life

	memo []remembered
	emit func(hpack.HeaderField, checks)
}

// begin starts a block whose strings are at most maxStr long.
func (d *decoder) begin(maxStr int) {
	d.carry = d.carry[:0]
	d.sawField, d.maxStr, d.nstr, d.skip = false, maxStr, 0, false
}

// write decodes the next fragment of the block.
func (d *decoder) write(p []byte) error {
	if len(d.carry) > 0 {
		d.carry = append(d.carry, p...)
		d.carried += int64(len(p))
		p = d.carry
	}
	for len(p) > 0 {
		n, err := d.field(p)
		if err == errNeedMore {
			// A whole field is two strings and their lengths: more than
			// that is a string too long, cut or not.
			if len(p) > 2*(d.maxStr+8) {
				return errStringLength
			}
			// The carry is kept where it is when no field of it came
			// whole: copying it onto itself for every fragment would
			// cost the square of a field cut into many.
			if len(p) != len(d.carry) {
				d.carry = append(d.carry[:0], p...)
				d.carried += int64(len(p))
			}
			return nil
		}
		if err != nil {
			return err
		}
		p = p[n:]
	}
	d.carry = d.carry[:0]
	return nil
}

// end reports whether the block ended between fields.
func (d *decoder) end() error {
	cut := len(d.carry) > 0
	// A carry grown for a long field cut across frames goes with the
	// block: kept, it would stay with a connection gone quiet, up to
	// twice the header list limit.
	if cap(d.carry) > 4<<10 {
		d.carry = nil
	}
	if cut {
		return errTruncated
	}
	return nil
}

// field decodes the representation p begins with (RFC 7541 6) and
// returns the bytes it took.
func (d *decoder) field(p []byte) (int, error) {
	b := p[0]
	switch {
	case b&0x80 != 0: // indexed
		i, n, err := readInt(p, 7)
		if err != nil {
			return 0, err
		}
		f, err := d.at(i)
		if err != nil {
			return 0, err
		}
		return n, d.took(f.HeaderField, f.checks)
	case b&0xc0 == 0x40: // literal with incremental indexing
		return d.literal(p, 6, true, false)
	case b&0xe0 == 0x20: // dynamic table size update
		// It may come only before the block's first field (RFC 7541
		// 4.2), or, as x/net's decoder allows, while the table is empty.
		if d.sawField && d.size > 0 {
			return 0, errors.New("hpack: table size update after a field")
		}
		v, n, err := readInt(p, 5)
		if err != nil {
			return 0, err
		}
		if v > DefaultTable {
			return 0, fmt.Errorf("hpack: table size update to %d, over the %d relay allows", v, DefaultTable)
		}
		d.max = uint32(v)
		d.evict(0)
		return n, nil
	default: // literal without indexing (0000), never indexed (0001)
		return d.literal(p, 4, false, b&0x10 != 0)
	}
}

// literal decodes a literal field whose name index has a prefix-bit
// prefix; index says the table takes it, never that it is sensitive.
func (d *decoder) literal(p []byte, prefix uint8, index, never bool) (int, error) {
	idx, n, err := readInt(p, prefix)
	if err != nil {
		return 0, err
	}
	var f hpack.HeaderField
	var c checks
	var name, value []byte
	var nameHuff, valueHuff bool
	nameAt := -1
	if idx > 0 {
		e, err := d.at(idx)
		if err != nil {
			return 0, err
		}
		f.Name, c.name = e.Name, e.checks.name
	} else {
		nameAt = d.nstr
		name, nameHuff, err = d.readString(p, &n)
		if err != nil {
			return 0, err
		}
	}
	valueAt := d.nstr
	value, valueHuff, err = d.readString(p, &n)
	if err != nil {
		return 0, err
	}
	if !d.skip || index {
		if nameAt >= 0 {
			s, err := d.decode(nameAt, name, nameHuff)
			if err != nil {
				return 0, err
			}
			f.Name, c.name = s.s, s.asName
		}
		s, err := d.decode(valueAt, value, valueHuff)
		if err != nil {
			return 0, err
		}
		f.Value, c.value = s.s, s.asVal
	}
	if index {
		d.add(f, c)
	}
	f.Sensitive = never
	return n, d.took(f, c)
}

// took passes a decoded field on.
func (d *decoder) took(f hpack.HeaderField, c checks) error {
	d.sawField = true
	if len(f.Name) > d.maxStr || len(f.Value) > d.maxStr {
		return errStringLength
	}
	if !d.skip {
		d.emit(f, c)
	}
	return nil
}

// readString reads the string at p[*n:] (RFC 7541 5.2) and moves *n past
// it, returning its bytes as they came.
func (d *decoder) readString(p []byte, n *int) (s []byte, huff bool, err error) {
	p = p[*n:]
	if len(p) == 0 {
		return nil, false, errNeedMore
	}
	huff = p[0]&0x80 != 0
	l, k, err := readInt(p, 7)
	if err != nil {
		return nil, false, err
	}
	if l > uint64(d.maxStr) {
		return nil, false, errStringLength
	}
	if l > uint64(len(p)-k) {
		return nil, false, errNeedMore
	}
	*n += k + int(l)
	d.nstr++
	return p[k : k+int(l)], huff, nil
}

// decode returns the string wire stands for, the ordinal-th literal
// string of the block.
func (d *decoder) decode(ordinal int, wire []byte, huff bool) (str, error) {
	var m *remembered
	if ordinal < memoStrings && len(wire) <= memoBytes {
		for len(d.memo) <= ordinal {
			d.memo = append(d.memo, remembered{})
		}
		m = &d.memo[ordinal]
		if m.ok && m.huff == huff && bytes.Equal(m.wire, wire) {
			return m.str, nil
		}
	}
	var s string
	if huff {
		var err error
		if s, err = hpack.HuffmanDecodeToString(wire); err != nil {
			return str{}, err
		}
		if len(s) > d.maxStr {
			return str{}, errStringLength
		}
	} else {
		s = string(wire)
	}
	ds := newStr(s)
	if m != nil {
		m.huff, m.wire, m.str, m.ok = huff, append(m.wire[:0], wire...), ds, true
	}
	return ds, nil
}

// at returns the field at index i of the tables (RFC 7541 2.3.3).
func (d *decoder) at(i uint64) (tableField, error) {
	switch {
	case i == 0:
		return tableField{}, errors.New("hpack: index 0")
	case i <= uint64(len(static)):
		st := &static[i-1]
		return tableField{hpack.HeaderField{Name: st.name, Value: st.value}, staticChecks[i-1]}, nil
	}
	back := i - uint64(len(static)) - 1 // 0 for the newest entry
	if back >= uint64(len(d.ents)) {
		return tableField{}, fmt.Errorf("hpack: index %d past the tables' %d entries", i, len(static)+len(d.ents))
	}
	return d.ents[len(d.ents)-1-int(back)], nil
}

// add puts f in the dynamic table, evicting the oldest entries to make
// room; a field larger than the whole table empties it (RFC 7541 4.4).
func (d *decoder) add(f hpack.HeaderField, c checks) {
	size := uint64(len(f.Name)) + uint64(len(f.Value)) + entryOverhead
	if size > uint64(d.max) {
		clear(d.ents)
		d.ents, d.size = d.ents[:0], 0
		return
	}
	d.evict(uint32(size))
	d.ents = append(d.ents, tableField{hpack.HeaderField{Name: f.Name, Value: f.Value}, c})
	d.size += uint32(size)
}

// evict drops the oldest entries until room bytes more fit under max.
func (d *decoder) evict(room uint32) {
	n := 0
	for n < len(d.ents) && d.size+room > d.max {
		d.size -= d.ents[n].Size()
		n++
	}
	if n == 0 {
		return
	}
	k := copy(d.ents, d.ents[n:])
	clear(d.ents[k:])
	d.ents = d.ents[:k]
}

// readInt reads the integer p begins with, its first byte's low prefix
// bits and the bytes after (RFC 7541 5.1), and returns the bytes it took.
func readInt(p []byte, prefix uint8) (uint64, int, error) {
	max := uint64(1)<<prefix - 1
	v := uint64(p[0]) & max
	if v < max {
		return v, 1, nil
	}
	for i, shift := 1, uint(0); i < len(p); i++ {
		b := p[i]
		v += uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, i + 1, nil
		}
		shift += 7
		if shift >= 63 {
			return 0, 0, errInteger
		}
	}
	return 0, 0, errNeedMore
}
