//go:build !unix

package main

import (
	"log"

	"relay/demo"
)

// toggleOnSignal does nothing where SIGUSR1 does not exist; the
// /admin/health/ endpoints still switch health.
func toggleOnSignal(*demo.Health, *log.Logger) (stop func()) { return func() {} }
