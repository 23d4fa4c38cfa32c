package stats

// gRPC responses are counted by the grpc-status they ended with: the
// seventeen codes gRPC defines (0 OK to 16 UNAUTHENTICATED) each have a
// counter of their own, and any other value a backend sends counts as
// "other", so a backend cannot grow the label set either.

// NumGRPC is the number of grpc-status labels: 0 to 16, then "other".
const NumGRPC = 18

// GRPCCodes are the grpc-status labels gRPC responses are counted under,
// as the grpc-status field writes them.
var GRPCCodes = [NumGRPC]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "other"}

// GRPCNames are the names gRPC gives the codes of GRPCCodes.
var GRPCNames = [NumGRPC]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED", "other"}

// GRPCIndex is the index in GRPCCodes of a grpc-status value: its code
// for a decimal 0 to 16 (leading zeros allowed, as gRPC's own parsers
// read them), NumGRPC-1 ("other") for anything else, and -1 for "", a
// response that is not gRPC or carried no status.
func GRPCIndex(s string) int {
	if s == "" {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return NumGRPC - 1
		}
		n = n*10 + int(c-'0')
		if n >= NumGRPC-1 {
			return NumGRPC - 1
		}
	}
	return n
}

// ObserveGRPC counts one gRPC response that ended with grpc-status
// status; "" (not gRPC, or no status) counts nothing. It is apart from
// Observe because most requests are not gRPC.
func (r *Requests) ObserveGRPC(status string) {
	if i := GRPCIndex(status); i >= 0 {
		r.grpc[i].Add(1)
	}
}
