package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder turns YAML nodes into typed values, recording a Problem for each
// value of the wrong type instead of stopping at the first.
type decoder struct {
	file string
	errs *Errors
}

func (d *decoder) problem(line int, key, format string, args ...any) {
	d.errs.add(Problem{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows an alias to the node it names. Walking a fixed schema never
// revisits a node more than the schema's depth allows, so aliases cannot
// make decoding blow up.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's value for messages, shortened so a stray paste of
// a huge value does not flood the terminal.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return quote(n.Value)
	}
	return "nothing usable"
}

func (d *decoder) str(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.problem(n.Line, key, "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) integer(n *yaml.Node, key string) (int, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var v int
		if err := n.Decode(&v); err == nil {
			return v, true
		}
		d.problem(n.Line, key, "%s is too large", describe(n))
		return 0, false
	}
	d.problem(n.Line, key, "must be a whole number, got %s", describe(n))
	return 0, false
}

func (d *decoder) boolean(n *yaml.Node, key string) (bool, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var v bool
		if err := n.Decode(&v); err == nil {
			return v, true
		}
	}
	d.problem(n.Line, key, "must be true or false, got %s", describe(n))
	return false, false
}

// duration accepts a number of seconds (10, 0.5, also quoted) or a Go
// duration string (500ms, 2s, 1m30s). The sign is kept so validation can
// say "negative" rather than "not a duration".
func (d *decoder) duration(n *yaml.Node, key string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int":
			// YAML's own reading keeps 0x10 and 0o17 meaning what they say.
			var secs int64
			if err := n.Decode(&secs); err != nil || secs > math.MaxInt64/int64(time.Second) || secs < math.MinInt64/int64(time.Second) {
				d.problem(n.Line, key, "%s: duration is too large", describe(n))
				return 0, false
			}
			return time.Duration(secs) * time.Second, true
		case "!!float", "!!str":
			v, err := parseDuration(n.Value)
			if err == nil {
				return v, true
			}
			d.problem(n.Line, key, "%s: %v", describe(n), err)
			return 0, false
		}
	}
	d.problem(n.Line, key, "must be a duration such as 10 (seconds), 0.5, 500ms or 2s, got %s", describe(n))
	return 0, false
}

// parseDuration reads s as seconds when it is a plain number and as a Go
// duration otherwise.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if secs, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil {
		if math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, fmt.Errorf("not a duration: use seconds (10, 0.5) or a unit (500ms, 2s)")
		}
		ns := secs * float64(time.Second)
		if ns >= math.MaxInt64 || ns <= math.MinInt64 {
			return 0, fmt.Errorf("duration is too large")
		}
		return time.Duration(math.Round(ns)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		if strings.Contains(err.Error(), "invalid duration") {
			return 0, fmt.Errorf("not a duration: use seconds (10, 0.5) or a unit (500ms, 2s)")
		}
		return 0, fmt.Errorf("not a duration: %w", err)
	}
	return v, nil
}

// listItem is one scalar of a YAML list with its line.
type listItem struct {
	value string
	line  int
}

// strList decodes a list of strings; a bad item is reported and skipped.
func (d *decoder) strList(n *yaml.Node, key string) ([]listItem, bool) {
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, key, "must be a list, got %s", describe(n))
		return nil, false
	}
	items := make([]listItem, 0, len(n.Content))
	for i, it := range n.Content {
		it = resolve(it)
		s, ok := d.str(it, fmt.Sprintf("%s[%d]", key, i))
		if ok {
			items = append(items, listItem{value: s, line: it.Line})
		}
	}
	return items, true
}

// settingLine is the line of the setting key names in the mapping v, a path
// such as "exporter.batch_size" or "resource_attributes.service.name" (a
// key may hold dots): the line of its deepest part the file has, else v's
// own line. A component's Check (tracing's, compress's) names keys, not
// nodes: a problem is shown where its key is written.
func settingLine(v *yaml.Node, key string) int {
	line := v.Line
	parts := strings.Split(key, ".")
	for len(parts) > 0 && v.Kind == yaml.MappingNode {
		found := false
		// The longest run of parts that is one key first.
		for n := len(parts); n > 0 && !found; n-- {
			name := strings.Join(parts[:n], ".")
			for i := 0; i+1 < len(v.Content); i += 2 {
				if v.Content[i].Value == name {
					line, v, parts, found = v.Content[i].Line, v.Content[i+1], parts[n:], true
					break
				}
			}
		}
		if !found {
			break
		}
	}
	return line
}
