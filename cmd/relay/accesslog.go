package main

import (
	"errors"
	"io"
	"log/slog"
	"os"

	"relay/internal/config"
	"relay/internal/logging"
)

// accessLog is a process's access log and the file it writes, which
// SIGUSR1 (alone) or the supervisor's word (a serving process) reopens.
type accessLog struct {
	log    *logging.AccessLog // nil: access_log is false
	reopen func() error       // nil: nothing of its own to reopen
	close  func() error       // nil: nothing of its own to close
}

// openAccessLog starts the access log of a process that serves. Its lines
// go to access_log_file when set, else where the process log's go (out):
//
//   - relay alone writes access_log_file through a rotating Output, as it
//     writes log_file;
//   - a serving process under a supervisor appends its lines itself, whole,
//     to access_log_file or else to log_file, as nginx's workers do, and
//     reopens the file when the supervisor, which rotates it by size for
//     every process, says so; without either file its lines go to its
//     standard output for the supervisor to copy.
func openAccessLog(cfg *config.Config, alone bool, out io.Writer) (*accessLog, error) {
	a := &accessLog{}
	if !cfg.AccessLog {
		return a, nil
	}
	format, err := logging.ParseFormat(cfg.AccessLogFormat)
	if err != nil {
		return nil, err
	}
	switch {
	case alone && cfg.AccessLogFile != "":
		o, err := logging.Open(cfg.AccessLogFile, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays)
		if err != nil {
			return nil, err
		}
		out, a.reopen, a.close = o, o.Rotate, o.Close
	case !alone && (cfg.AccessLogFile != "" || cfg.LogFile != ""):
		file := cfg.AccessLogFile
		if file == "" {
			file = cfg.LogFile
		}
		ap, err := logging.OpenAppend(file)
		if err != nil {
			return nil, err
		}
		out, a.reopen, a.close = ap, ap.Reopen, ap.Close
	}
	a.log = logging.NewAccessLog(out, logging.WithFormat(format))
	return a, nil
}

// reopenFile reopens the access log's own file, if it has one, and logs a
// failure. After Close (the process is stopping) there is nothing to
// reopen.
func (a *accessLog) reopenFile(log *slog.Logger) {
	if a.reopen == nil {
		return
	}
	if err := a.reopen(); err != nil && !errors.Is(err, os.ErrClosed) {
		log.Error("reopening the access log file failed", "err", err)
	}
}

// stop writes what is buffered and closes the file.
func (a *accessLog) stop() {
	a.log.Close()
	if a.close != nil {
		a.close()
	}
}

// sharedAccessFile opens, in the supervisor, access_log_file as a file its
// processes append to and it rotates by size; nil when there is none.
func sharedAccessFile(cfg *config.Config) (*logging.Shared, error) {
	if !cfg.AccessLog || cfg.AccessLogFile == "" {
		return nil, nil
	}
	return logging.OpenShared(cfg.AccessLogFile, cfg.LogMaxSizeMB, cfg.LogMaxBackups, cfg.LogMaxAgeDays)
}
