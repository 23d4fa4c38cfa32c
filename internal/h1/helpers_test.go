package h1

import (
	"errors"
	"strconv"
	"testing"
)

// checkErr fails the test unless err is want (nil for success). For protocol
// errors it also checks the status code the server answers with, so a test
// table states both what went wrong and what the client is told.
func checkErr(t *testing.T, err, want error, status int) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("err = %v, want success", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	var pe *Error
	if errors.As(err, &pe) {
		if pe.Status != status {
			t.Fatalf("status = %d, want %d (%v)", pe.Status, status, err)
		}
	} else if status != 0 {
		t.Fatalf("err = %v is not an *Error, want status %d", err, status)
	}
}

// fieldNames returns the names of fields marked (or not marked) Hop.
func fieldNames(fields []Field, hop bool) []string {
	var names []string
	for _, f := range fields {
		if f.Hop == hop {
			names = append(names, string(f.Name))
		}
	}
	return names
}

// manyFields returns n field lines "X-Fn: v\r\n".
func manyFields(n int) string {
	b := make([]byte, 0, n*12)
	for i := 0; i < n; i++ {
		b = append(b, "X-F"...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ": v\r\n"...)
	}
	return string(b)
}
