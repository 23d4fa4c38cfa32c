package main

import (
	"log/slog"
	"time"

	"relay/internal/logging"
)

// With processes: N the serving processes append to log_file and
// access_log_file themselves, and the supervisor rotates the files for
// them all: it watches their sizes and, when one is due, moves it aside
// and tells every process to reopen its files.

// watchSizes checks files every logging.RotateCheckEvery until stop is
// closed: each past its size is rotated, and then reopen tells the
// serving processes to reopen theirs.
func watchSizes(files []*logging.Shared, log *slog.Logger, reopen func(), stop <-chan struct{}) {
	t := time.NewTicker(logging.RotateCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			due := false
			for _, s := range files {
				if s.Due() {
					rotateShared(log, s)
					due = true
				}
			}
			if due {
				reopen()
			}
		}
	}
}

// rotateShared moves s aside and starts it anew, logging a failure.
func rotateShared(log *slog.Logger, s *logging.Shared) {
	if err := s.Rotate(); err != nil {
		log.Error("log rotation failed", "err", err)
	}
}
