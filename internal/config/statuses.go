package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// decodeStatuses reads breaker_statuses: a list of HTTP statuses, such as
// [502, 503, 504]. A bad item is reported and skipped; Validate judges the
// range.
func decodeStatuses(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, "breaker_statuses", "must be a list of HTTP statuses such as [502, 503], got %s", describe(v))
		return
	}
	c.BreakerStatuses = c.BreakerStatuses[:0]
	for i, it := range v.Content {
		if n, ok := d.integer(resolve(it), fmt.Sprintf("breaker_statuses[%d]", i)); ok {
			c.BreakerStatuses = append(c.BreakerStatuses, n)
		}
	}
}
