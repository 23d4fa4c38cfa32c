package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// decodeStatuses reads breaker_statuses: a list of HTTP statuses, such as
// [502, 503, 504]. A bad item is reported and skipped; Validate judges the
// range.
func decodeStatuses(d *decoder, p *Pool, v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, path, "must be a list of HTTP statuses such as [502, 503], got %s", describe(v))
		return
	}
	p.BreakerStatuses = p.BreakerStatuses[:0]
	for i, it := range v.Content {
		if n, ok := d.integer(resolve(it), fmt.Sprintf("%s[%d]", path, i)); ok {
			p.BreakerStatuses = append(p.BreakerStatuses, n)
		}
	}
}
