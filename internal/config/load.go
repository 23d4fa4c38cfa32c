package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML file at path, applies defaults for every key it leaves
// out and validates the result. A file that cannot be read gives that error
// wrapped (errors.Is(err, fs.ErrNotExist) works); anything wrong with the
// contents gives *Errors listing every problem.
func Load(path string, opts Options) (*Config, error) {
	return LoadOverlay(path, Overlay{}, opts)
}

// LoadOverlay is Load with command-line flags laid over the file before
// validation, so a file without backends is valid when -backends supplies
// them, and problems in the file and in the flags are reported together.
func LoadOverlay(path string, o Overlay, opts Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(data, path, o, opts)
}

// Parse is Load for YAML already in memory; path is only used to name the
// file in problems and is stored in Config.Path.
func Parse(data []byte, path string, opts Options) (*Config, error) {
	return parse(data, path, Overlay{}, opts)
}

func parse(data []byte, path string, o Overlay, opts Options) (*Config, error) {
	c := Default()
	c.Path = path
	c.lines = map[string]int{}
	c.flags = map[string]string{}
	c.undecoded = map[string]bool{}
	var errs Errors
	d := &decoder{file: path, errs: &errs}
	if !d.document(data, c) {
		// Without a syntax tree every further check would only repeat
		// "missing" for keys that may well be in the file.
		return nil, errs.err()
	}
	if !c.listenSet {
		c.Listen = ":" + strconv.Itoa(c.Port)
	}
	c.overlay(o, &errs)
	c.followInterval()
	c.resolvePools()
	c.check(&errs, opts)
	if err := errs.err(); err != nil {
		return nil, err
	}
	c.normalize()
	return c, nil
}

// document decodes data into c, recording problems. It returns false when the
// file is not YAML or not a mapping, where checking settings would only
// report them all missing.
func (d *decoder) document(data []byte, c *Config) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return true // an empty file: defaults, and "no backends" later
		}
		d.syntax(err, data)
		return false
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		if len(extra.Content) > 0 && !isNull(extra.Content[0]) {
			d.problem(extra.Line, "", "the file holds more than one YAML document (---); relay reads exactly one")
		}
	case !errors.Is(err, io.EOF):
		d.syntax(err, data)
		return false
	}
	if len(doc.Content) == 0 {
		return true
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return true
	}
	if root.Kind != yaml.MappingNode {
		d.problem(root.Line, "", "the top level must be a mapping of settings (key: value), got %s", describe(root))
		return false
	}
	d.settings(root, c)
	return true
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax records a YAML parse error, lifting the line number the library
// buries in its message into the problem's Line. The parser names the line
// where it stopped, which is often not the one to fix, so the text is read
// for the likely mistake (shapeHint) and the problem put on its line.
func (d *decoder) syntax(err error, data []byte) {
	msg, line := trimYAMLPrefix(err.Error()), 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		if n, aerr := strconv.Atoi(m[1]); aerr == nil {
			msg, line = m[2], n
		}
	}
	if line == 0 {
		// The parser names no line for bytes it refuses before reading
		// any structure (not UTF-8, control characters): what the file
		// looks like does not matter until they are gone, so they are
		// reported alone, on their line.
		if n := badByteLine(data); n > 0 {
			d.problem(n, "", "invalid YAML: %s; YAML files are UTF-8 text without control characters other than tab and line breaks", msg)
			return
		}
	}
	switch h, ok := shapeHint(data); {
	case ok && h.line == line:
		d.problem(line, h.key, "invalid YAML: %s; %s", msg, h.msg)
	case ok:
		d.problem(h.line, h.key, "invalid YAML: %s (the YAML parser stopped at line %d: %s)", h.msg, line, msg)
	case shapeMessage(msg):
		d.problem(line, "", "invalid YAML: %s; %s", msg, shapeRules)
	default:
		d.problem(line, "", "invalid YAML: %s", msg)
	}
}

// shapeRules is what to look for when the parser's message is about the
// file's shape and the mistake was not found.
const shapeRules = "look at the indentation here and above: the \"- \" items of one list stand in one column, " +
	"the keys of one mapping (of one list item too) stand in one column, a key needs a space after its colon " +
	"(key: value), and a value holding \": \" or \" #\" must be quoted"

// shapeMessage reports whether the parser's message says the file's
// indentation or keys are not what it expected.
func shapeMessage(msg string) bool {
	for _, s := range []string{"did not find expected key", "did not find expected '-' indicator",
		"could not find expected ':'", "mapping values are not allowed", "block sequence entries are not allowed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func trimYAMLPrefix(s string) string {
	rest, _ := strings.CutPrefix(s, "yaml: ")
	return rest
}

// ParseOverlay is Parse with the flags in o laid over the file, as
// LoadOverlay does for a file it reads itself. A serving process uses it on
// the configuration its supervisor loaded.
func ParseOverlay(data []byte, path string, o Overlay, opts Options) (*Config, error) {
	return parse(data, path, o, opts)
}

// followInterval makes the default health_check_timeout follow a
// health_check_interval the file set shorter than it: half the interval,
// so that a file setting only health_check_interval: 2s (HAProxy's inter)
// loads. A timeout the file set is held to the interval as it is (no flag
// sets it).
func (c *Config) followInterval() {
	_, set := c.lines["health_check_timeout"]
	hc := &c.HealthCheck
	if !set && hc.Interval > 0 && hc.Timeout >= hc.Interval {
		hc.Timeout = hc.Interval / 2
	}
}
