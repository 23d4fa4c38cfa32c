package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The YAML parser says where it stopped, not what was meant: a list item
// one space out of line is "did not find expected '-' indicator" at the
// line of the list's key, two lines up. shapeHint reads the text of a file
// the parser refused as relay's files are written (block mappings and
// lists, one key per line) and names the first line that breaks that
// shape, with the shape that was expected.

// shapeProblem is the line that breaks the file's shape, the key it sits
// under (as problems name keys: "backends[1].weight") and what is wrong.
type shapeProblem struct {
	line int
	key  string
	msg  string
}

var (
	// keyLine is "key: value" or "key:" as relay's keys are spelled.
	keyLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*):(?:\s+(.*))?$`)
	// gluedKey is "key:value", a key without the space YAML needs.
	gluedKey = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*):([^\s/].*)$`)
	// innerKey finds " key: " inside a plain value.
	innerKey = regexp.MustCompile(`\s([A-Za-z_][A-Za-z0-9_]*):(\s|$)`)
)

// shapeFrame is one open block: a mapping whose keys stand at col, or a
// list whose "- " stand at col.
type shapeFrame struct {
	col   int
	list  bool
	path  string // the key the block is the value of
	line  int    // where the block's first key or item is
	first string // a mapping's first key
	items int    // a list's items so far
	last  int    // the line of a list's last item
	bare  bool   // a list's last item is a plain value, not a mapping
}

// shapeHint returns the first line of data that breaks the shape of a
// block YAML file, or ok false when it finds none.
func shapeHint(data []byte) (p shapeProblem, ok bool) {
	var (
		stack   []shapeFrame
		pending *shapeFrame // a "key:" with nothing after it opens a block below
		skipTo  = -1        // inside a block scalar (| or >): lines deeper than this
		flow    int         // open [ and { of a flow collection across lines
	)
	known := append(append(append([]string(nil), topKeys...), backendKeys...), certificateKeys...)
	for i, raw := range strings.Split(string(data), "\n") {
		n := i + 1
		text := strings.TrimRight(raw, " \r")
		body := strings.TrimLeft(text, " \t")
		if body == "" || strings.HasPrefix(body, "#") {
			continue
		}
		indent := len(text) - len(body)
		if skipTo >= 0 {
			// A block scalar's lines are text: a tab after their
			// indentation is part of it.
			if indent > skipTo {
				continue
			}
			skipTo = -1
		}
		if strings.Contains(text[:indent], "\t") {
			return shapeProblem{n, "", "a tab indents this line; YAML indents with spaces only"}, true
		}
		if flow > 0 {
			flow += strings.Count(body, "[") + strings.Count(body, "{") - strings.Count(body, "]") - strings.Count(body, "}")
			continue
		}
		if body == "---" || body == "..." || strings.HasPrefix(body, "%") {
			continue
		}
		body = stripComment(body)

		// "- " and what follows it, which starts at col.
		dash, col := false, indent
		for body == "-" || strings.HasPrefix(body, "- ") {
			rest := strings.TrimLeft(body[1:], " ")
			col += len(body) - len(rest)
			body, dash = rest, true
			if body == "" {
				break
			}
		}
		var key, value string
		m := keyLine.FindStringSubmatch(body)
		if m != nil {
			key, value = m[1], m[2]
		} else if g := gluedKey.FindStringSubmatch(body); g != nil && slices.Contains(known, g[1]) {
			return shapeProblem{n, "", fmt.Sprintf("%s: a key needs a space after its colon: write %s",
				quote(body), quote(g[1]+": "+g[2]))}, true
		}

		// The block this line belongs to.
		if pending != nil {
			switch {
			case dash && indent >= pending.col:
				stack = append(stack, shapeFrame{col: indent, list: true, path: pending.path, line: n})
			case !dash && indent > pending.col:
				stack = append(stack, shapeFrame{col: indent, path: pending.path, line: n, first: key})
			}
			pending = nil
		}
		if len(stack) == 0 {
			stack = append(stack, shapeFrame{col: indent, list: dash, line: n, first: key})
		}
		var left *shapeFrame // the deepest block this line closed
		for len(stack) > 1 {
			top := stack[len(stack)-1]
			if top.col < indent || top.col == indent && (top.list == dash || !top.list) {
				break
			}
			left = &top
			stack = stack[:len(stack)-1]
		}
		top := &stack[len(stack)-1]
		at := top.path
		if key != "" {
			at = join(top.path, key)
		}

		switch {
		case dash && !(top.list && top.col == indent):
			if sib := siblings(stack, left); sib != nil {
				return shapeProblem{n, fmt.Sprintf("%s[%d]", sib.path, sib.items), fmt.Sprintf("this list item is indented %s, but the items of its list (from line %d) are indented %s: "+
					"every \"- \" of one list stands in the same column", spaces(indent), sib.line, spaces(sib.col))}, true
			}
			return shapeProblem{n, top.path, fmt.Sprintf("a list item (\"- \") where the keys of the mapping from line %d stand: "+
				"a list is the value of a key, as in \"backends:\" with its \"- url:\" items below it", top.line)}, true
		case !dash && top.list:
			item := fmt.Sprintf("%s[%d]", top.path, max(top.items-1, 0))
			if top.bare {
				return shapeProblem{n, join(item, key), fmt.Sprintf("%s is under a list item that is a plain value (line %d); "+
					"to give the item keys, write it as \"- url: ...\" and line %s up under url",
					quote(body), top.last, nameOr(key, "this line"))}, true
			}
			keys := top.col + 2
			if left != nil && !left.list {
				keys = left.col
			}
			return shapeProblem{n, join(item, key), fmt.Sprintf("%s is indented %s, between the \"- \" (%s) and the keys of its item (%s): "+
				"the keys of one item stand in one column, as in \"- url: http://127.0.0.1:8001\" with \"  weight: 2\" under url",
				nameOr(key, "this line"), spaces(indent), spaces(top.col), spaces(keys))}, true
		case !dash && key != "" && left != nil && left.list && left.col == indent && left.col > top.col:
			item := fmt.Sprintf("%s[%d]", left.path, max(left.items-1, 0))
			return shapeProblem{n, join(item, key), fmt.Sprintf("%s stands in the column of the \"- \" of the list above it (from line %d): "+
				"a key of an item goes under the item's first key, as in \"- url: http://127.0.0.1:8001\" with \"  weight: 2\" under url",
				key, left.line)}, true
		case !dash && top.col != indent && key != "":
			return shapeProblem{n, at, fmt.Sprintf("%s is indented %s, but %s (line %d) is indented %s: the keys of one mapping stand in one column",
				key, spaces(indent), top.first, top.line, spaces(top.col))}, true
		}
		if dash {
			top.items++
			top.last = n
			top.bare = key == ""
			at = fmt.Sprintf("%s[%d]", top.path, top.items-1)
			if key != "" {
				stack = append(stack, shapeFrame{col: col, path: at, line: n, first: key})
				top = &stack[len(stack)-1]
				at = join(at, key)
			}
		}

		// The value after "key: ".
		switch {
		case key == "":
		case value == "":
			pending = &shapeFrame{col: top.col, path: at}
		case strings.HasPrefix(value, "|") || strings.HasPrefix(value, ">"):
			skipTo = top.col
		case strings.HasPrefix(value, "[") || strings.HasPrefix(value, "{"):
			flow = strings.Count(value, "[") + strings.Count(value, "{") - strings.Count(value, "]") - strings.Count(value, "}")
		case strings.HasPrefix(value, `"`) || strings.HasPrefix(value, "'"):
		default:
			if k := innerKey.FindStringSubmatchIndex(value); k != nil {
				inner := strings.TrimSpace(value[k[0]:])
				return shapeProblem{n, at, fmt.Sprintf("the value %s holds %s, which YAML takes for a second key on the line: "+
					"put %s on a line of its own, under %s; or quote the value if it holds \": \" itself",
					quote(value), quote(value[k[2]:k[3]]+": "), quote(inner), key)}, true
			}
		}
	}
	return shapeProblem{}, false
}

// siblings is the list a misplaced "- " most likely belongs to: the
// one the line just closed, else the innermost open one.
func siblings(stack []shapeFrame, left *shapeFrame) *shapeFrame {
	if left != nil && left.list {
		return left
	}
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].list {
			return &stack[i]
		}
	}
	return nil
}

// stripComment drops a " #" comment from the end of a line outside quotes.
func stripComment(s string) string {
	var q byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '#' && i > 0 && (s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimRight(s[:i], " \t")
		}
	}
	return s
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func nameOr(key, other string) string {
	if key == "" {
		return other
	}
	return key
}

func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return strconv.Itoa(n) + " spaces"
}
