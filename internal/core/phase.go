package core

import (
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
)

// Phase names one point on a request's way through the core. Forward
// drives every request through the phases in this order, whichever door
// it came in by and whichever protocol its backend speaks:
//
//	accept            the request as it arrived: its id, its trace context;
//	                  then relay's own answers before routing (ACME
//	                  HTTP-01 challenges, acmechallenge.go)
//	route             the route table: the pool, the target, relay's own
//	                  answers (404, 400, redirects) (routing.go)
//	admit             whether it may go on: a loop (Via), the rate limits,
//	                  the body held or refused (body.go)
//	attempt           pick, wait, try, retry (forward.go, attempt.go)
//	upstream request  the head as the backend gets it (request.go)
//	response head     the backend's head as the client gets it
//	response body     the body on its way to the client
//	done              the counters, the access log, the span
//
// A Feature acts at the phases whose method it has (Accepter, Answerer, Admitter,
// AttemptWatcher, UpstreamWriter and UpstreamAppender, HeadFilter and
// InterimFilter, Finisher); a feature at the response head
// may give the body a BodyFilter, which is the response body phase. The
// route phase is the core's own, and so is the attempt's work: a feature
// there only learns of the attempts that failed.
type Phase uint8

// The phases, in the order a request passes them.
const (
	PhaseAccept Phase = iota
	PhaseRoute
	PhaseAdmit
	PhaseAttempt
	PhaseUpstreamRequest
	PhaseResponseHead
	PhaseResponseBody
	PhaseDone
)

var phaseNames = [...]string{"accept", "route", "admit", "attempt", "upstream request", "response head", "response body", "done"}

// String names the phase as relay -explain and the docs do.
func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown phase"
}

// Feature is a unit of behaviour on the request path: compression,
// tracing, request ids, the access log. It declares the phases it acts in
// by the methods it has, and keeps a request's state of its own in the
// exchange's slot it was given (slots.go), never in a field of Exchange.
// A feature that is off is not in the chain, so it costs a request
// nothing: no call, no allocation.
type Feature interface {
	// FeatureName names the feature for relay -explain.
	FeatureName() string
}

// Accepter acts on a request as it arrived, before routing; only the
// core's own chain (Config.Features) has accepters, since no route is
// known yet.
type Accepter interface {
	Feature
	Accept(x *Exchange)
}

// Answerer may answer a request itself as it arrived, at the end of the
// accept phase (after every Accepter, so the request has its id and its
// access log copy) and before routing: a request it answers, returning
// its outcome and true, meets no route, no redirect, no admit feature and
// no backend. Only the core's own chain has answerers; a request it does
// not answer must cost it as little as a comparison of the path.
type Answerer interface {
	Feature
	AnswerFirst(x *Exchange, now time.Time) (Outcome, bool)
}

// Admitter decides whether a request may go on once it is routed. One
// that answers the request itself returns its outcome and true; the
// request then goes to no backend.
type Admitter interface {
	Feature
	Admit(x *Exchange, now time.Time) (Outcome, bool)
}

// AttemptWatcher learns of each attempt on a backend that did not answer
// the request (the attempt phase), as it ends: the backend, why it failed
// in a few words, and when. A request that a backend answers at once
// makes no call.
type AttemptWatcher interface {
	Feature
	AttemptFailed(x *Exchange, b *backend.Backend, why string, at time.Time)
}

// UpstreamWriter takes part in writing the request head the backend
// gets (the upstream request phase). It runs before the client's
// fields are copied, so it may mark some of them Hop to keep them back,
// and it appends its own fields to out as HTTP/1.1 lines.
type UpstreamWriter interface {
	Feature
	UpstreamHead(x *Exchange, out []byte) []byte
}

// UpstreamAppender appends fields to the request head the backend gets
// after the client's own (the upstream request phase, its end), where a
// field that adds to a list the client began must go.
type UpstreamAppender interface {
	Feature
	AppendUpstream(x *Exchange, out []byte) []byte
}

// HeadFilter changes the backend's final response head before the client
// gets it (the response head phase), and may give the body a BodyFilter
// (ResponseBody.SetFilter).
type HeadFilter interface {
	Feature
	ResponseHead(x *Exchange, resp *h1.Response)
}

// InterimFilter changes an informational response (103 Early Hints, say)
// before the client gets it, which a door passes on ahead of the final
// one: the response head phase, for the heads that come first.
type InterimFilter interface {
	Feature
	InterimHead(x *Exchange, resp *h1.Response)
}

// Finisher learns how a request ended (the done phase): its outcome and
// how long it took from its arrival at the core.
type Finisher interface {
	Feature
	Done(x *Exchange, o Outcome, took time.Duration)
}

// BodyFilter changes a response body on its way to the client: each call
// takes the next bytes the backend sent (end: they are the last) and
// returns what the client gets in their place, valid until the next call.
// more says that the backend has already sent more of the body, which the
// next call brings without waiting: a filter may then hold back what it
// would otherwise push out now (a compressor's flush), since nothing waits
// on the backend. When more is false the client must get everything the
// bytes so far stand for, or a streamed body would stall.
type BodyFilter interface {
	Filter(p []byte, end, more bool) ([]byte, error)
	// Release ends the filter's work on the body, complete or not.
	Release()
}

// Chain is an ordered list of features, split by phase once when it is
// made, so a request walks only the features of each phase it reaches.
// Package dataplane builds the chains: the core's own (Config.Features)
// and one for each route and pool (Routing.Features, PoolConfig.Features).
type Chain struct {
	features []Feature
	accept   []Accepter
	first    []Answerer
	admit    []Admitter
	failed   []AttemptWatcher
	upstream []UpstreamWriter
	appended []UpstreamAppender
	head     []HeadFilter
	interim  []InterimFilter
	done     []Finisher
}

// NewChain returns the chain of fs in their order; nil entries are left
// out.
func NewChain(fs ...Feature) *Chain {
	c := new(Chain)
	for _, f := range fs {
		if f == nil {
			continue
		}
		c.features = append(c.features, f)
		if a, ok := f.(Accepter); ok {
			c.accept = append(c.accept, a)
		}
		if a, ok := f.(Answerer); ok {
			c.first = append(c.first, a)
		}
		if a, ok := f.(Admitter); ok {
			c.admit = append(c.admit, a)
		}
		if w, ok := f.(AttemptWatcher); ok {
			c.failed = append(c.failed, w)
		}
		if w, ok := f.(UpstreamWriter); ok {
			c.upstream = append(c.upstream, w)
		}
		if w, ok := f.(UpstreamAppender); ok {
			c.appended = append(c.appended, w)
		}
		if h, ok := f.(HeadFilter); ok {
			c.head = append(c.head, h)
		}
		if h, ok := f.(InterimFilter); ok {
			c.interim = append(c.interim, h)
		}
		if d, ok := f.(Finisher); ok {
			c.done = append(c.done, d)
		}
	}
	return c
}

// Features returns the chain's features in order.
func (c *Chain) Features() []Feature {
	if c == nil {
		return nil
	}
	return c.features
}

// Phases lists the phases f acts in.
func Phases(f Feature) []Phase {
	var ps []Phase
	_, ac := f.(Accepter)
	_, an := f.(Answerer)
	if ac || an {
		ps = append(ps, PhaseAccept)
	}
	if _, ok := f.(Admitter); ok {
		ps = append(ps, PhaseAdmit)
	}
	if _, ok := f.(AttemptWatcher); ok {
		ps = append(ps, PhaseAttempt)
	}
	_, w := f.(UpstreamWriter)
	_, a := f.(UpstreamAppender)
	if w || a {
		ps = append(ps, PhaseUpstreamRequest)
	}
	_, h := f.(HeadFilter)
	_, i := f.(InterimFilter)
	if h || i {
		ps = append(ps, PhaseResponseHead)
	}
	if _, ok := f.(BodyFiltering); ok {
		ps = append(ps, PhaseResponseBody)
	}
	if _, ok := f.(Finisher); ok {
		ps = append(ps, PhaseDone)
	}
	return ps
}

// BodyFiltering marks a HeadFilter that may give response bodies a
// BodyFilter, so that Phases can say it acts in the response body phase.
type BodyFiltering interface {
	HeadFilter
	FiltersBodies()
}

// noChain is the chain of a route or pool with no features.
var noChain = NewChain()

// chainOr returns c, or the empty chain when c is nil.
func chainOr(c *Chain) *Chain {
	if c == nil {
		return noChain
	}
	return c
}

// accepted runs the accept phase of c on x.
func (c *Chain) accepted(x *Exchange) {
	for _, a := range c.accept {
		a.Accept(x)
	}
}

// answeredFirst runs the answerers of c on x, at the accept phase's end;
// done reports that one answered the request.
func (c *Chain) answeredFirst(x *Exchange, now time.Time) (o Outcome, done bool) {
	for _, a := range c.first {
		if o, done = a.AnswerFirst(x, now); done {
			return o, true
		}
	}
	return o, false
}

// admitted runs the admit phase of c on x; done reports that a feature
// answered the request.
func (c *Chain) admitted(x *Exchange, now time.Time) (o Outcome, done bool) {
	for _, a := range c.admit {
		if o, done = a.Admit(x, now); done {
			return o, true
		}
	}
	return o, false
}

// attemptFailed runs the attempt phase of c on x, for an attempt on b
// that failed.
func (c *Chain) attemptFailed(x *Exchange, b *backend.Backend, why string, at time.Time) {
	for _, w := range c.failed {
		w.AttemptFailed(x, b, why, at)
	}
}

// upstreamHead runs the upstream request phase of c on x.
func (c *Chain) upstreamHead(x *Exchange, out []byte) []byte {
	for _, w := range c.upstream {
		out = w.UpstreamHead(x, out)
	}
	return out
}

// appendUpstream runs the end of the upstream request phase of c on x.
func (c *Chain) appendUpstream(x *Exchange, out []byte) []byte {
	for _, w := range c.appended {
		out = w.AppendUpstream(x, out)
	}
	return out
}

// responseHead runs the response head phase of c on x.
func (c *Chain) responseHead(x *Exchange, resp *h1.Response) {
	for _, h := range c.head {
		h.ResponseHead(x, resp)
	}
}

// interimHead runs the response head phase of c on an informational
// response to x.
func (c *Chain) interimHead(x *Exchange, resp *h1.Response) {
	for _, h := range c.interim {
		h.InterimHead(x, resp)
	}
}

// finished runs the done phase of c on x.
func (c *Chain) finished(x *Exchange, o Outcome, took time.Duration) {
	for _, d := range c.done {
		d.Done(x, o, took)
	}
}
