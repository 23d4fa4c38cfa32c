package health

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Check types accepted in Config.Type.
const (
	TypeHTTP = "http"
	TypeTCP  = "tcp"
)

// DefaultPath is the request target of HTTP probes when Config.Path is empty.
const DefaultPath = "/health"

// Config says how backends are probed. An empty Type means TypeHTTP and an
// empty Path means DefaultPath; durations and thresholds must be positive.
type Config struct {
	// Type is TypeHTTP (a GET that must answer 2xx) or TypeTCP (a connect
	// that must succeed).
	Type string
	// Path is the request target of HTTP probes, such as /health or
	// /status?full=1. TCP probes ignore it.
	Path string
	// Interval is the time between the starts of two probes of one backend.
	Interval time.Duration
	// Timeout bounds one probe from the dial to the end of the drained body.
	Timeout time.Duration
	// Rise is how many consecutive passes bring an unhealthy backend back.
	Rise int
	// Fall is how many consecutive failures take a healthy backend out.
	Fall int
	// ReuseConnection keeps an HTTP probe's connection open for the next
	// probe of the same backend. When false, every probe opens a new
	// connection and asks the backend to close it.
	ReuseConnection bool
}

// withDefaults fills the optional fields and reports every invalid one at once.
func (c Config) withDefaults() (Config, error) {
	if c.Type == "" {
		c.Type = TypeHTTP
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	var errs []error
	if c.Type != TypeHTTP && c.Type != TypeTCP {
		errs = append(errs, fmt.Errorf("health: check type %q is neither %q nor %q", c.Type, TypeHTTP, TypeTCP))
	}
	if !strings.HasPrefix(c.Path, "/") {
		errs = append(errs, fmt.Errorf("health: check path %q does not start with /", c.Path))
	}
	if strings.ContainsFunc(c.Path, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		// The path goes into the request line as it is.
		errs = append(errs, fmt.Errorf("health: check path %q holds a space or control character", c.Path))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("health: interval %v is not positive", c.Interval))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("health: timeout %v is not positive", c.Timeout))
	}
	if c.Rise < 1 {
		errs = append(errs, fmt.Errorf("health: rise %d is below 1", c.Rise))
	}
	if c.Fall < 1 {
		errs = append(errs, fmt.Errorf("health: fall %d is below 1", c.Fall))
	}
	return c, errors.Join(errs...)
}
