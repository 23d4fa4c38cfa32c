package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// poolName is what a pool may be called: its name becomes a metric label.
var poolName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// CheckPoolName says what is wrong with name as a pool's name, or returns
// nil. It is the one rule for the pools section and for every other place
// a pool is named (an etcd value, a flag); DefaultPool passes it.
func CheckPoolName(name string) error {
	if !poolName.MatchString(name) {
		return fmt.Errorf("pool names are 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit (they become metric labels), got %s", quote(name))
	}
	return nil
}

// NamedPool is one pool with its name, as AllPools lists them.
type NamedPool struct {
	Name string
	*Pool
}

// HasDefaultPool reports whether the pool named DefaultPool exists: the
// top level lists backends, or discovery may find them. Without it, a
// request no route takes gets 404.
func (c *Config) HasDefaultPool() bool {
	return len(c.Backends) > 0 || c.Discovery.Etcd != nil
}

// AllPools lists every pool: DefaultPool first when it exists, then the
// named pools in the order of the file.
func (c *Config) AllPools() []NamedPool {
	ps := make([]NamedPool, 0, len(c.PoolNames)+1)
	if c.HasDefaultPool() {
		ps = append(ps, NamedPool{DefaultPool, &c.Pool})
	}
	for _, name := range c.PoolNames {
		ps = append(ps, NamedPool{name, c.Pools[name]})
	}
	return ps
}

// LookupPool returns the pool called name, or nil when there is none.
func (c *Config) LookupPool(name string) *Pool {
	if name == DefaultPool {
		if c.HasDefaultPool() {
			return &c.Pool
		}
		return nil
	}
	return c.Pools[name]
}

// poolKeys are the keys a pool section takes, in the order of fields, and
// poolDecoders how each is read. An init function sets them: decodePools,
// which reads them, is part of fields itself.
var (
	poolKeys     []string
	poolDecoders = map[string]func(d *decoder, p *Pool, v *yaml.Node, path string){}
)

func init() {
	for _, f := range fields {
		if f.pool != nil {
			poolKeys = append(poolKeys, f.key)
			poolDecoders[f.key] = f.pool
		}
	}
}

// poolFieldIndex maps each pool key to its field in Pool, for falling
// back to the top level's value.
var poolFieldIndex = func() map[string][]int {
	m := map[string][]int{}
	walkSettings(reflect.TypeOf(Pool{}), "", false, nil, func(key string, _ bool, index []int) {
		m[key] = index
	})
	return m
}()

// decodePools reads the pools section: a mapping from pool name to the
// pool's keys.
func decodePools(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, "pools", "must be a mapping from pool names to their settings (pools:\n  api:\n    backends: [...]), got %s", describe(v))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.problem(k.Line, "pools", "pool names must be plain names, got %s", describe(k))
			continue
		}
		name := k.Value
		at := "pools." + name
		if first, dup := seen[name]; dup {
			d.problem(k.Line, at, "pool %s is defined twice (first at line %d)", quote(name), first)
			continue
		}
		seen[name] = k.Line
		if name == DefaultPool {
			d.problem(k.Line, at, "%q is the name of the top level's pool: write its keys (backends, algorithm, ...) at the top level", DefaultPool)
			continue
		}
		if err := CheckPoolName(name); err != nil {
			d.problem(k.Line, at, "%s", err)
			continue
		}
		p := &Pool{line: k.Line, lines: map[string]int{}, undecoded: map[string]bool{}}
		switch {
		case isNull(val):
		case val.Kind != yaml.MappingNode:
			d.problem(val.Line, at, "must be a mapping of pool settings (backends:, algorithm:, ...), got %s", describe(val))
			continue
		default:
			d.mapping(val, at+".", poolKeys, func(key string, kn, kv *yaml.Node) {
				if isNull(kv) {
					return // "key:" with no value takes the top level's
				}
				p.lines[key] = kn.Line
				before := len(d.errs.Problems)
				poolDecoders[key](d, p, kv, at+"."+key)
				if len(d.errs.Problems) > before {
					p.undecoded[key] = true
				}
			})
		}
		if c.Pools == nil {
			c.Pools = map[string]*Pool{}
		}
		c.Pools[name] = p
		c.PoolNames = append(c.PoolNames, name)
	}
}

// resolvePools gives every named pool the top level's value of each key
// it does not set itself, backends excepted. It runs after the flags are
// laid over the top level, so a pool that sets no algorithm follows
// -algorithm too.
func (c *Config) resolvePools() {
	top := reflect.ValueOf(&c.Pool).Elem()
	for _, name := range c.PoolNames {
		p := c.Pools[name]
		own := reflect.ValueOf(p).Elem()
		for _, key := range poolKeys {
			if _, set := p.lines[key]; set || key == "backends" {
				continue
			}
			idx := poolFieldIndex[key]
			src := top.FieldByIndex(idx)
			if src.Kind() == reflect.Slice && !src.IsNil() {
				src = reflect.AppendSlice(reflect.MakeSlice(src.Type(), 0, src.Len()), src)
			}
			own.FieldByIndex(idx).Set(src)
		}
		// As at the top level, a timeout the pool does not set follows
		// an interval shorter than it.
		hc := &p.HealthCheck
		if _, set := p.lines["health_check_timeout"]; !set && hc.Interval > 0 && hc.Timeout >= hc.Interval {
			hc.Timeout = hc.Interval / 2
		}
		// A pool that checks with another type than grpc does not take
		// the top level's gRPC service, which only grpc checks send.
		if _, set := p.lines["health_check_grpc_service"]; !set && hc.Type != "grpc" {
			hc.GRPCService = ""
		}
	}
}

// poolSite is where named pool name was written: each key it sets on its
// own line, a key it takes from the top level on the pool's name.
func (c *Config) poolSite(name string, p *Pool) site {
	prefix := "pools." + name + "."
	s := site{
		at: func(key string) Problem {
			line, set := p.lines[key]
			if !set {
				line = p.line
			}
			return Problem{File: c.Path, Line: line, Key: prefix + key}
		},
		origin: func(key string) Problem {
			if line, set := p.lines[key]; set {
				return Problem{File: c.Path, Line: line, Key: prefix + key}
			}
			return c.at(key)
		},
		backendAt: func(i int, field string, line int) Problem {
			return Problem{File: c.Path, Line: line, Key: p.Backends[i].key + "." + field}
		},
		undecoded: func(key string) bool {
			_, set := p.lines[key]
			return p.undecoded[key] || !set && c.undecoded[key]
		},
		processes: c.ServingProcesses(),
	}
	if c.Discovery.Etcd == nil && !c.undecoded["discovery"] {
		s.noBackends = "no backends configured; list at least one (- url: http://HOST:PORT): a pool's backends are its own, they do not come from the top level"
	}
	return s
}

// checkPools appends the problems of every named pool. The checks are the
// top level's; a problem with a value the pool takes from the top level
// is reported there once, unless only this pool's own settings make it
// one (a breaker_failures set here with the top level's
// breaker_open_time of 0): then it is reported on the pool, saying where
// the value comes from.
func (c *Config) checkPools(errs *Errors, opts Options, topBad map[string]bool) {
	for _, name := range c.PoolNames {
		p := c.Pools[name]
		prefix := "pools." + name + "."
		var own Errors
		p.check(&own, c.poolSite(name, p), opts)
		for _, pr := range own.Problems {
			key, _ := strings.CutPrefix(pr.Key, prefix)
			if _, set := p.lines[key]; !set && key != "backends" && slices.Contains(poolKeys, key) {
				if topBad[key] {
					continue
				}
				pr.Msg += fmt.Sprintf(" (pool %s takes %s from the top level; set it in the pool to change it)", name, key)
			}
			errs.add(pr)
		}
	}
}

// allPoolsDeclared is the top level's pool, whether or not it exists,
// and every named pool, for checks of every backend the file lists.
func (c *Config) allPoolsDeclared() []NamedPool {
	ps := []NamedPool{{DefaultPool, &c.Pool}}
	for _, name := range c.PoolNames {
		ps = append(ps, NamedPool{name, c.Pools[name]})
	}
	return ps
}

// siteOf is where pool np was written.
func (c *Config) siteOf(np NamedPool) site {
	if np.Name == DefaultPool {
		return c.topSite()
	}
	return c.poolSite(np.Name, np.Pool)
}

// BackendCount is the number of backends the file lists, in every pool.
func (c *Config) BackendCount() int {
	n := 0
	for _, np := range c.AllPools() {
		n += len(np.Backends)
	}
	return n
}
