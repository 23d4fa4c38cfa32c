// Package hblock encodes and reads HTTP/2 header blocks (RFC 7541) for
// relay's two HTTP/2 engines, the front door and the client of HTTP/2
// backends, cheaply for what a proxy carries: the same fields, block
// after block. The Reader is in reader.go.
//
// Encoding: a field sent before goes as one index into the peer's dynamic table,
// and finding it costs a string comparison, not a hash: the encoder
// remembers which entry the field in each place of the last block went
// to, and a block mostly repeats the one before it (the next call to the
// same service). A field not found there is looked for in the tables,
// the dynamic one holding a few dozen entries at most. What the encoder
// adds to the table it copies, so the fields it is given may be views
// of buffers reused once the block is out. Values new with every
// message go as literals never indexed (Never), and do not push the
// others out of the table.
package hblock

import (
	"strings"

	"golang.org/x/net/http2/hpack"
)

// DefaultTable is the size of the dynamic table both ends start with
// (SETTINGS_HEADER_TABLE_SIZE's initial value), and the largest this
// encoder uses.
const DefaultTable = 4096

// entryOverhead is what each entry costs in the table besides its name
// and value (RFC 7541 4.1).
const entryOverhead = 32

// maxMemo bounds the places of a block the encoder remembers.
const maxMemo = 64

type entry struct {
	name, value string
	id          uint64 // insertion number, from 1
}

// Encoder encodes header blocks for one connection; the blocks must
// reach the peer in the order they were encoded. It is not safe for
// concurrent use.
type Encoder struct {
	ents     []entry // the dynamic table, oldest first
	inserted uint64  // entries ever added: the newest entry's id
	size     uint32  // the table's size (RFC 7541 4.1)
	max      uint32  // the table's maximum size, signalled to the peer
	limit    uint32  // the peer's SETTINGS_HEADER_TABLE_SIZE
	// update says the maximum changed since the last block; low is the
	// smallest it was set to meanwhile (RFC 7541 4.2).
	update bool
	low    uint32
	// memo holds, for each place of the last head block and of the last
	// trailer block (a head follows trailers on a connection serving
	// many calls, and is like the last head, not like them), where its
	// field went: a static index (1-61) or 61 + a dynamic entry's id; 0
	// for none.
	memo    [2][]uint64
	trailer int // the block is a trailer section: memo[1]
	pos     int
	buf     []byte
	// neverName is the name Never was last given, neverIdx its static
	// index: the field new with every message costs no table lookup.
	neverName string
	neverIdx  uint64
}

// NewEncoder returns an encoder whose peer's table is the default size.
func NewEncoder() *Encoder {
	return &Encoder{max: DefaultTable, limit: DefaultTable}
}

// SetLimit takes the peer's SETTINGS_HEADER_TABLE_SIZE: the table shrinks
// to it at once, or grows back up to DefaultTable, and the next block
// tells the peer.
func (e *Encoder) SetLimit(v uint32) {
	e.limit = v
	m := min(v, DefaultTable)
	if m == e.max {
		return
	}
	if !e.update {
		e.update, e.low = true, m
	}
	e.max = m
	e.low = min(e.low, m)
	e.evict(0)
}

// Begin starts a header block, a message's head.
func (e *Encoder) Begin() { e.begin(0) }

// BeginTrailers starts a header block that is a trailer section.
func (e *Encoder) BeginTrailers() { e.begin(1) }

func (e *Encoder) begin(trailer int) {
	e.buf = e.buf[:0]
	e.pos, e.trailer = 0, trailer
	if e.update {
		// A maximum that went down and up again since the last block
		// must be signalled at its lowest first. The table then empties
		// (an update to 0), since x/net's decoder, Go's gRPC among its
		// users, takes a second update only into an empty table.
		if e.low < e.max {
			e.evictAll()
			e.buf = appendInt(e.buf, 0x20, 5, 0)
		}
		e.buf = appendInt(e.buf, 0x20, 5, uint64(e.max))
		e.update = false
	}
}

// Block returns the block encoded since Begin, valid until the next
// Begin.
func (e *Encoder) Block() []byte { return e.buf }

// Field adds a field to the block, as an index when the tables hold it,
// and otherwise as a literal the peer adds to its table.
func (e *Encoder) Field(name, value string) {
	pos := e.pos
	e.pos++
	if memo := e.memo[e.trailer]; pos < len(memo) {
		if code := memo[pos]; code != 0 && e.same(code, name, value) {
			e.buf = appendInt(e.buf, 0x80, 7, e.index(code))
			return
		}
	}
	sidx, full := staticIndex(name, value)
	if full {
		e.remember(pos, sidx)
		e.buf = appendInt(e.buf, 0x80, 7, sidx)
		return
	}
	for i := len(e.ents) - 1; i >= 0; i-- {
		if en := &e.ents[i]; en.name == name && en.value == value {
			code := uint64(len(static)) + en.id
			e.remember(pos, code)
			e.buf = appendInt(e.buf, 0x80, 7, e.index(code))
			return
		}
	}
	// A field taking over half the table would push most of the others
	// out: it goes as a literal the peer does not add.
	size := uint64(len(name)) + uint64(len(value)) + entryOverhead
	if size > uint64(e.max/2) {
		e.literal(0x00, 4, sidx, name, value)
		return
	}
	e.literal(0x40, 6, sidx, name, value)
	if sidx != 0 {
		name = static[sidx-1].name
	} else {
		name = strings.Clone(name)
	}
	e.evict(uint32(size))
	e.inserted++
	e.ents = append(e.ents, entry{name: name, value: strings.Clone(value), id: e.inserted})
	e.size += uint32(size)
	e.remember(pos, uint64(len(static))+e.inserted)
}

// Never adds a field as a literal never indexed (RFC 7541 6.2.3): a value
// new with every message, or one that intermediaries must not index. Its
// strings go as they are, not Huffman-coded: sent with every message,
// they cost a copy rather than a coding.
func (e *Encoder) Never(name, value string) {
	e.pos++
	if name != e.neverName {
		e.neverName, e.neverIdx = strings.Clone(name), staticNames[name]
	}
	sidx := e.neverIdx
	e.buf = appendInt(e.buf, 0x10, 4, sidx)
	if sidx == 0 {
		e.buf = appendRaw(e.buf, name)
	}
	e.buf = appendRaw(e.buf, value)
}

// literal appends a literal field with the representation's first bits
// and prefix, its name by static index sidx when not 0.
func (e *Encoder) literal(first byte, prefix uint8, sidx uint64, name, value string) {
	e.buf = appendInt(e.buf, first, prefix, sidx)
	if sidx == 0 {
		e.buf = appendString(e.buf, name)
	}
	e.buf = appendString(e.buf, value)
}

// same reports whether the table entry code stands for holds name and
// value.
func (e *Encoder) same(code uint64, name, value string) bool {
	if code <= uint64(len(static)) {
		st := &static[code-1]
		return st.name == name && st.value == value
	}
	en := e.entry(code - uint64(len(static)))
	return en != nil && en.name == name && en.value == value
}

// entry returns the dynamic entry with id, nil once it has been evicted.
func (e *Encoder) entry(id uint64) *entry {
	back := e.inserted - id // 0 for the newest
	if back >= uint64(len(e.ents)) {
		return nil
	}
	return &e.ents[len(e.ents)-1-int(back)]
}

// index returns the index code stands for now.
func (e *Encoder) index(code uint64) uint64 {
	if code <= uint64(len(static)) {
		return code
	}
	return uint64(len(static)) + 1 + e.inserted - (code - uint64(len(static)))
}

func (e *Encoder) remember(pos int, code uint64) {
	if pos >= maxMemo {
		return
	}
	memo := &e.memo[e.trailer]
	for len(*memo) <= pos {
		*memo = append(*memo, 0)
	}
	(*memo)[pos] = code
}

// evict drops the oldest entries until room bytes more fit under max.
func (e *Encoder) evict(room uint32) {
	n := 0
	for n < len(e.ents) && e.size+room > e.max {
		en := &e.ents[n]
		e.size -= uint32(len(en.name) + len(en.value) + entryOverhead)
		n++
	}
	if n == 0 {
		return
	}
	k := copy(e.ents, e.ents[n:])
	clear(e.ents[k:])
	e.ents = e.ents[:k]
}

// evictAll empties the table.
func (e *Encoder) evictAll() {
	clear(e.ents)
	e.ents = e.ents[:0]
	e.size = 0
}

// appendInt appends v as an HPACK integer with an n-bit prefix (RFC 7541
// 5.1), the first byte's other bits being first.
func appendInt(dst []byte, first byte, n uint8, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(dst, first|byte(v))
	}
	dst = append(dst, first|byte(max))
	v -= max
	for v >= 128 {
		dst = append(dst, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(dst, byte(v))
}

// appendString appends s as an HPACK string (RFC 7541 5.2), Huffman-coded
// when that is shorter.
func appendString(dst []byte, s string) []byte {
	if h := hpack.HuffmanEncodeLength(s); h < uint64(len(s)) {
		dst = appendInt(dst, 0x80, 7, h)
		return hpack.AppendHuffmanString(dst, s)
	}
	return appendRaw(dst, s)
}

// appendRaw appends s as an HPACK string not Huffman-coded.
func appendRaw(dst []byte, s string) []byte {
	dst = appendInt(dst, 0, 7, uint64(len(s)))
	return append(dst, s...)
}
