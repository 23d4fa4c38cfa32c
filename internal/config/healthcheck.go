package config

import (
	"fmt"
	"unicode/utf8"
)

// healthCheckTypes are the values of health_check_type.
var healthCheckTypes = []string{"http", "tcp", "grpc"}

// maxGRPCService bounds health_check_grpc_service, which goes out in
// every check.
const maxGRPCService = 1 << 10

// checkGRPCService reports a health_check_grpc_service that a grpc check
// cannot send (a protobuf string is UTF-8), or that is set for a check of
// another type, which would ignore it.
func (p *Pool) checkGRPCService(bad func(key, format string, args ...any), s site) {
	hc := p.HealthCheck
	switch svc := hc.GRPCService; {
	case svc == "" || s.undecoded("health_check_grpc_service"):
	case !utf8.ValidString(svc):
		bad("health_check_grpc_service", "%s is not valid UTF-8, which a gRPC service name (a protobuf string) must be", quote(svc))
	case len(svc) > maxGRPCService:
		bad("health_check_grpc_service", "is %d bytes long; at most %d", len(svc), maxGRPCService)
	case hc.Type != "grpc" && !s.undecoded("health_check_type"):
		where := s.at("health_check_type")
		from := "by default"
		switch {
		case where.File == FlagsFile:
			from = "set by " + where.Key
		case where.Line > 0:
			from = fmt.Sprintf("on line %d", where.Line)
		}
		bad("health_check_grpc_service", "is set (%s), but health_check_type is %s %s; only health_check_type: grpc asks for a service",
			quote(svc), quote(hc.Type), from)
	}
}
