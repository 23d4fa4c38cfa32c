package config

import "unicode/utf8"

// badByteLine returns the 1-based line of the first byte sequence in data
// that a YAML file may not hold: one that is not UTF-8, or a control
// character other than tab, CR and LF (YAML 1.2 5.1: C0 controls, DEL,
// C1 controls but NEL, and the noncharacters U+FFFE and U+FFFF); 0 when
// there is none.
func badByteLine(data []byte) int {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1,
			r < 0x20 && r != '\t' && r != '\n' && r != '\r',
			r == 0x7f,
			r >= 0x80 && r <= 0x9f && r != 0x85,
			r == 0xfffe, r == 0xffff:
			return line
		case r == '\n':
			line++
		}
		i += size
	}
	return 0
}
