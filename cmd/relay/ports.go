package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"relay/internal/config"
)

// listenError is a listener that could not be opened, said as its user
// would fix it: the flag to type and, when relay runs a file, the key.
type listenError struct {
	msg string
	err error
}

func (e *listenError) Error() string { return e.msg }
func (e *listenError) Unwrap() error { return e.err }

// problem is why a listen failed, without the address again.
func problem(err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return "address already in use"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// fileOf is the configuration file relay runs, or "" when the flags or
// the demo's built-in configuration say everything.
func fileOf(f *flags, cfg *config.Config) string {
	if f.demo && f.config == "" {
		return ""
	}
	return cfg.Path
}

// listenFailed reports that what, set by key, could not listen on addr,
// and how to move it: the flags fix, and the key in the file relay runs.
func listenFailed(what, key, addr, fix, file string, err error) error {
	msg := fmt.Sprintf("%s on %s: %s", what, addr, problem(err))
	switch {
	case fix != "" && file != "":
		msg += "; pass " + fix + ", or change " + key + " in " + file
	case fix != "":
		msg += "; pass " + fix
	case file != "":
		msg += "; change " + key + " in " + file
	}
	return &listenError{msg: msg, err: err}
}

// listenHint and adminHint are what to pass for the client and admin
// listeners.
const (
	listenHint = "-listen HOST:PORT or -port PORT"
	adminHint  = "-admin-listen 127.0.0.1:PORT, or -admin-listen '' to turn it off"
)
