package compress

import (
	"errors"
	"sync"
)

// Policy is a route's or pool's compression, built once from its Config
// by New: which codings, at which levels, for which responses. It is
// safe for concurrent use and allocates nothing per request.
type Policy struct {
	order       []Encoding
	pools       [numEncodings]*sync.Pool
	minLength   int64
	types       typeSet
	exclude     typeSet
	withCookies bool
	config      Config
	// budget is the memory the encoders in use may hold, the process's
	// (SetEncoderMemory); costs what an encoder of each coding counts
	// for in it, at p's levels.
	budget *budget
	costs  [numEncodings]int64
}

// New checks c (Config.Check), applies its defaults and builds the
// Policy. Policies with the same levels share their pools of encoders,
// so a configuration of many routes holds no more idle encoders than one
// of a single route.
func New(c Config) (*Policy, error) {
	if errs := c.Check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c = c.WithDefaults()
	p := &Policy{minLength: c.MinLength, withCookies: c.WithCookies, config: c, budget: encoders}
	for _, s := range c.Encodings {
		e, _ := ParseEncoding(s)
		p.order = append(p.order, e)
		key := keyOf(e, c)
		pool, err := poolFor(key)
		if err != nil {
			return nil, err
		}
		p.pools[e], p.costs[e] = pool, encoderCost(key)
	}
	var err error
	if p.types, err = newTypeSet(c.Types); err != nil {
		return nil, err
	}
	if p.exclude, err = newTypeSet(c.ExcludeTypes); err != nil {
		return nil, err
	}
	return p, nil
}

// WithCookies reports whether responses that set cookies may be
// compressed (Config.WithCookies); the core asks it when a response
// carries Set-Cookie.
func (p *Policy) WithCookies() bool { return p.withCookies }

// Encodings returns the codings p produces in its order of preference;
// the caller must not change the slice.
func (p *Policy) Encodings() []Encoding { return p.order }

// Config returns the Config p was built from, with its defaults applied.
func (p *Policy) Config() Config { return p.config }
