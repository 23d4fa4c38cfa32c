package config

import (
	"slices"
	"strconv"
	"strings"
)

// FlagsFile is the File of a Problem found in a command-line flag.
const FlagsFile = "flags"

// Problem is one thing wrong with a configuration.
type Problem struct {
	// File is the configuration file, FlagsFile for a flag, "" if unknown.
	File string
	// Line is the 1-based YAML line, 0 when there is none.
	Line int
	// Key names the setting, such as "backends[1].weight" or "-port".
	Key string
	// Msg says what is wrong and, where it helps, what would be right.
	Msg string
}

// String formats p as "FILE:LINE: key: message", leaving out what is unknown.
func (p Problem) String() string { return p.format("") }

// Warning formats p as a warning: "FILE:LINE: warning: key: message".
func (p Problem) Warning() string { return p.format("warning: ") }

// format writes p's place, then kind, then its key and message.
func (p Problem) format(kind string) string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		b.WriteString(p.File + ":" + strconv.Itoa(p.Line) + ": ")
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	b.WriteString(kind)
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Errors is every problem found in one configuration. Load, Parse, Apply and
// Validate return it (as error) whenever anything is wrong.
type Errors struct {
	// Problems are sorted: the file's by line, those without a line next,
	// flags last.
	Problems []Problem
}

// Error lists the problems one per line, in file and line order.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (e *Errors) add(p Problem) { e.Problems = append(e.Problems, p) }

// err sorts the problems and returns e, or nil when there are none; returning
// a nil *Errors as error would make a non-nil interface.
func (e *Errors) err() error {
	if len(e.Problems) == 0 {
		return nil
	}
	// File problems by line, those without a line after them, flags last:
	// reading top to bottom then follows the file.
	rank := func(p Problem) int {
		switch {
		case p.File == FlagsFile:
			return 2
		case p.Line == 0:
			return 1
		}
		return 0
	}
	slices.SortStableFunc(e.Problems, func(a, b Problem) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return a.Line - b.Line
	})
	return e
}

// quote quotes s for a message, cut short so a stray paste of something huge
// does not flood the terminal.
func quote(s string) string {
	if len(s) > 60 {
		return strconv.Quote(s[:60]) + "..."
	}
	return strconv.Quote(s)
}
