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
	TypeGRPC = "grpc"
)

// DefaultPath is the request target of HTTP probes when Config.Path is empty.
const DefaultPath = "/health"

// Config says how backends are probed. An empty Type means TypeHTTP and an
// empty Path means DefaultPath; durations and thresholds must be positive.
type Config struct {
	// Type is TypeHTTP (a GET that must answer 2xx), TypeTCP (a connect
	// that must succeed) or TypeGRPC (grpc.health.v1.Health/Check over
	// HTTP/2, which must answer SERVING).
	Type string
	// Path is the request target of HTTP probes, such as /health or
	// /status?full=1. TCP and gRPC probes ignore it.
	Path string
	// GRPCService is the service gRPC probes ask about; "" asks for the
	// server's overall health. Only TypeGRPC takes one.
	GRPCService string
	// Interval is the time between the starts of two probes of one backend.
	Interval time.Duration
	// Timeout bounds one probe from the dial to the end of the drained body.
	Timeout time.Duration
	// Rise is how many consecutive passes bring an unhealthy backend back.
	Rise int
	// Fall is how many consecutive failures take a healthy backend out.
	Fall int
	// ReuseConnection keeps an HTTP or gRPC probe's connection open for
	// the next probe of the same backend. When false, every probe opens a
	// new connection (and an HTTP probe asks the backend to close it).
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
	if c.Type != TypeHTTP && c.Type != TypeTCP && c.Type != TypeGRPC {
		errs = append(errs, fmt.Errorf("health: check type %q is none of %q, %q and %q", c.Type, TypeHTTP, TypeTCP, TypeGRPC))
	}
	if c.GRPCService != "" && c.Type != TypeGRPC {
		errs = append(errs, fmt.Errorf("health: a gRPC service (%q) is set for checks of type %q; only %q checks take one", c.GRPCService, c.Type, TypeGRPC))
	}
	if err := checkGRPCService(c.GRPCService); err != nil {
		errs = append(errs, fmt.Errorf("health: gRPC service %q %w", c.GRPCService, err))
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
