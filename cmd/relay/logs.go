package main

import (
	"io"
	"log/slog"

	"relay/internal/config"
	"relay/internal/logging"
	"relay/internal/supervisor"
)

// logs are relay's log outputs: the writer the logger and the access log
// share, the logger, and its level, which a reload may change.
type logs struct {
	out    io.Writer
	log    *slog.Logger
	level  *slog.LevelVar
	rotate func() error // reopen or rotate the file; nothing for stdout
	close  func() error
	shared *logging.Shared // the supervisor's file, which its processes append to
}

// openLog opens relay's log: file, or stdout when file is "", and a logger
// at the configured level writing to it. A supervisor (shared) writes the file
// through an Appender beside its processes, serialising its own writers,
// and rotates it for them all.
func openLog(cfg *config.Config, file string, stdout io.Writer, shared bool) (*logs, error) {
	level, err := logging.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	l := &logs{level: new(slog.LevelVar), out: stdout}
	l.level.Set(level)
	switch {
	case shared && file != "":
		if l.shared, err = logging.OpenShared(file, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays); err != nil {
			return nil, err
		}
		l.out, l.rotate, l.close = l.shared, l.shared.Rotate, l.shared.Close
	default:
		o, err := logging.Open(file, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays)
		if err != nil {
			return nil, err
		}
		if file != "" {
			l.out = o
		}
		l.rotate, l.close = o.Rotate, o.Close
	}
	if shared {
		l.out = &supervisor.LockedWriter{W: l.out}
	}
	l.log = logging.NewLogger(l.out, l.level)
	return l, nil
}

// ownLogFile is the log file a process writes itself: log_file, but none
// for a serving process (sp), whose supervisor owns the file and copies
// the lines the process writes to its standard output.
func ownLogFile(cfg *config.Config, sp *supervisor.Process) string {
	if sp != nil {
		return ""
	}
	return cfg.LogFile
}

// setLevel applies a reloaded log_level.
func (l *logs) setLevel(cfg *config.Config) {
	if level, err := logging.ParseLevel(cfg.LogLevel); err == nil {
		l.level.Set(level)
	}
}

// reopen reopens (rotates) the log file, as SIGUSR1 asks, and logs a
// failure.
func (l *logs) reopen() {
	if err := l.rotate(); err != nil {
		l.log.Error("log rotation failed", "err", err)
	}
}
