package core

import (
	"bytes"
	"strings"

	"relay/internal/h1"
	"relay/internal/route"
)

// HeaderChanges is a route's changes to the header fields of its requests
// and responses (route.Spec's RequestHeaders and ResponseHeaders): a
// feature at the upstream request and response head phases. A field a
// route removes or sets is kept out of the trailers too, or a client (or a
// backend) would get it past the route by sending it after the body, to
// whoever reads trailers as header fields.
type HeaderChanges struct {
	req, resp fieldOps
}

// fieldOps are one side's changes: names to remove (set ones included)
// and fields to add (set ones included).
type fieldOps struct {
	remove []string // lower-case
	add    []h1.Field
	// names is remove as a list for the trailers, each name followed
	// by a comma (h1.AppendConnection's form).
	names string
}

// NewHeaderChanges returns the feature making the changes req to the
// request and resp to the response; nil when there are none, so that a
// route without them has no feature.
func NewHeaderChanges(req, resp route.HeaderOps) *HeaderChanges {
	if req.Empty() && resp.Empty() {
		return nil
	}
	return &HeaderChanges{req: opsOf(req), resp: opsOf(resp)}
}

func opsOf(ops route.HeaderOps) fieldOps {
	var f fieldOps
	for _, n := range ops.Remove {
		f.remove = append(f.remove, strings.ToLower(n))
	}
	for _, kv := range ops.Set {
		f.remove = append(f.remove, strings.ToLower(kv.Name))
		f.add = append(f.add, h1.Field{Name: []byte(kv.Name), Value: []byte(kv.Value)})
	}
	for _, kv := range ops.Add {
		f.add = append(f.add, h1.Field{Name: []byte(kv.Name), Value: []byte(kv.Value)})
	}
	for _, n := range f.remove {
		f.names += n + ","
	}
	return f
}

// FeatureName names the feature for relay -explain.
func (*HeaderChanges) FeatureName() string { return "header changes" }

// UpstreamHead keeps the fields the route removes or sets from the
// backend: the client's, in the head and in the trailers, and those relay
// wrote before it (X-Forwarded-*, Via, X-Request-Id, traceparent), so that
// a route's set replaces relay's value as it replaces the client's.
func (h *HeaderChanges) UpstreamHead(x *Exchange, out []byte) []byte {
	h.req.drop(x.Req.Fields)
	x.keepOutOfTrailers(h.req.names)
	if len(h.req.remove) > 0 {
		out = dropFieldLines(out, h.req.remove)
	}
	return out
}

// dropFieldLines removes from head, a request line and field lines each
// ending in CRLF as prepare writes them, the fields named in names
// (lower-case), and returns what is left.
func dropFieldLines(head []byte, names []string) []byte {
	i := bytes.Index(head, crlf)
	if i < 0 {
		return head
	}
	w := i + 2
	for r := w; r < len(head); {
		end := bytes.Index(head[r:], crlf)
		if end < 0 {
			end = len(head) - r
		} else {
			end += 2
		}
		line := head[r : r+end]
		if !namedIn(line, names) {
			w += copy(head[w:], line)
		}
		r += end
	}
	return head[:w]
}

// namedIn reports whether field line's name is one of names (lower-case).
func namedIn(line []byte, names []string) bool {
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return false
	}
	return named(&h1.Field{Name: line[:colon]}, names)
}

// named reports whether f is called one of names (lower-case).
func named(f *h1.Field, names []string) bool {
	for _, n := range names {
		if len(n) == len(f.Name) && f.Is(n) {
			return true
		}
	}
	return false
}

// AppendUpstream writes the fields the route adds or sets, after the
// client's: an added value comes last in its list, as in the response.
func (h *HeaderChanges) AppendUpstream(x *Exchange, out []byte) []byte {
	for _, f := range h.req.add {
		out = h1.AppendField(out, f.Name, f.Value)
	}
	return out
}

// ResponseHead makes the route's changes to the response head, and keeps
// the fields it removes or sets out of the response's trailers.
func (h *HeaderChanges) ResponseHead(x *Exchange, resp *h1.Response) {
	h.resp.drop(resp.Fields)
	resp.Fields = append(resp.Fields, h.resp.add...)
	x.respHops = append(x.respHops, h.resp.names...)
}

// InterimHead keeps the fields the route removes or sets from an
// informational response too; what it adds goes on the final response
// alone.
func (h *HeaderChanges) InterimHead(x *Exchange, resp *h1.Response) {
	h.resp.drop(resp.Fields)
}

// drop marks the fields removed (or set) Hop, so that no writer passes
// them on.
func (f *fieldOps) drop(fields []h1.Field) {
	if len(f.remove) == 0 {
		return
	}
	for i := range fields {
		if fl := &fields[i]; named(fl, f.remove) {
			fl.Hop = true
		}
	}
}
