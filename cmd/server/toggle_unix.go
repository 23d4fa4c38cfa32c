//go:build unix

package main

import (
	"log"
	"os"
	"os/signal"
	"syscall"

	"relay/demo"
)

// toggleOnSignal flips health on every SIGUSR1 until the returned function
// is called.
func toggleOnSignal(health *demo.Health, logger *log.Logger) (stop func()) {
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	exited := make(chan struct{})
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		defer close(exited)
		for {
			select {
			case <-sig:
				if health.Toggle() {
					logger.Print("SIGUSR1: /health now answers 503")
				} else {
					logger.Print("SIGUSR1: /health now answers 200")
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		<-exited
	}
}
