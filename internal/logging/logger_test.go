package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseLevel(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"debug", "debug", slog.LevelDebug, false},
		{"info", "info", slog.LevelInfo, false},
		{"warn", "warn", slog.LevelWarn, false},
		{"warning", "warning", slog.LevelWarn, false},
		{"error", "error", slog.LevelError, false},
		{"upper case", "INFO", slog.LevelInfo, false},
		{"spaces", " Error ", slog.LevelError, false},
		{"offset", "info+2", slog.LevelInfo + 2, false},
		{"empty", "", 0, true},
		{"unknown", "verbose", 0, true},
		{"number", "3", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLevel(tt.in)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), `"`+tt.in+`"`) {
					t.Fatalf("ParseLevel(%q) = %v, %v; want an error naming the input", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseLevel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelInfo)
	l.Debug("hidden")
	l.Info("backend up", "backend", "http://127.0.0.1:8001")
	l.Warn("slow", "after", 1500*time.Millisecond)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (debug filtered): %q", len(lines), lines)
	}
	var rec struct {
		Time    time.Time
		Level   string
		Msg     string
		Backend string
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	if rec.Level != "INFO" || rec.Msg != "backend up" || rec.Backend != "http://127.0.0.1:8001" || rec.Time.IsZero() {
		t.Fatalf("decoded %+v from %q", rec, lines[0])
	}
}
