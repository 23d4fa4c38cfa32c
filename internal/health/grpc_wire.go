package health

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The gRPC health protocol's two messages, written and read by hand: a
// HealthCheckRequest is one optional string (field 1, service), a
// HealthCheckResponse one enum (field 1, status). Pulling in a protobuf
// runtime for them would cost more than these few lines.

// maxGRPCMessage bounds the HealthCheckResponse relay reads: the real one
// is two bytes, so anything near this is not a health answer.
const maxGRPCMessage = 4 << 10

// maxGRPCService bounds health_check_grpc_service, which goes out in every
// check.
const maxGRPCService = 1 << 10

// ServingStatus values of grpc.health.v1.HealthCheckResponse.
const (
	servingUnknown        = 0
	serving               = 1
	servingNotServing     = 2
	servingServiceUnknown = 3
)

// servingName names a HealthCheckResponse status for log lines.
func servingName(s uint64) string {
	switch s {
	case servingUnknown:
		return "UNKNOWN"
	case serving:
		return "SERVING"
	case servingNotServing:
		return "NOT_SERVING"
	case servingServiceUnknown:
		return "SERVICE_UNKNOWN"
	}
	return strconv.FormatUint(s, 10)
}

// grpcCodes names gRPC's status codes, by number.
var grpcCodes = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// grpcCodeName names gRPC status code c, or gives it as a number.
func grpcCodeName(c int) string {
	if c >= 0 && c < len(grpcCodes) {
		return grpcCodes[c]
	}
	return "code " + strconv.Itoa(c)
}

// grpcRequestBody returns the request body: one uncompressed gRPC message
// (a flag byte, a 4-byte big-endian length) holding a HealthCheckRequest
// for service, an empty message when service is "".
func grpcRequestBody(service string) []byte {
	var msg []byte
	if service != "" {
		msg = append(msg, 0x0a) // field 1, length-delimited
		msg = binary.AppendUvarint(msg, uint64(len(service)))
		msg = append(msg, service...)
	}
	body := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	return append(body, msg...)
}

// checkGRPCService reports what keeps s from being sent as the service of
// a HealthCheckRequest, if anything: a protobuf string is UTF-8.
func checkGRPCService(s string) error {
	switch {
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8, which a protobuf string must be")
	case len(s) > maxGRPCService:
		return fmt.Errorf("is %d bytes long, over the limit of %d", len(s), maxGRPCService)
	}
	return nil
}

// grpcMessage takes the one gRPC message out of a response body: a
// 5-byte prefix, then exactly the length it gives, nothing after.
func grpcMessage(body []byte) ([]byte, error) {
	switch {
	case len(body) == 0:
		return nil, errors.New("no response message")
	case len(body) < 5:
		return nil, fmt.Errorf("response message cut short: %d bytes of its 5-byte prefix", len(body))
	case body[0] != 0:
		// relay offers no grpc-accept-encoding, so a compressed answer
		// breaks the protocol.
		return nil, fmt.Errorf("response message has compressed flag %d; relay asked for no compression", body[0])
	}
	n := binary.BigEndian.Uint32(body[1:5])
	switch rest := uint64(len(body) - 5); {
	case n > maxGRPCMessage:
		return nil, fmt.Errorf("response message of %d bytes is over the limit of %d", n, maxGRPCMessage)
	case uint64(n) > rest:
		return nil, fmt.Errorf("response message cut short: %d of its %d bytes", rest, n)
	case uint64(n) < rest:
		return nil, errors.New("more than one response message")
	}
	return body[5:], nil
}

// servingStatus decodes a HealthCheckResponse and returns its status
// field; fields it does not know are skipped, as protobuf readers must.
// A message without the field has status 0 (UNKNOWN), proto3's default;
// one with it several times has the last, as protobuf's merge rule says.
func servingStatus(msg []byte) (uint64, error) {
	var status uint64
	for len(msg) > 0 {
		tag, n := binary.Uvarint(msg)
		if n <= 0 {
			return 0, errors.New("HealthCheckResponse: malformed field tag")
		}
		msg = msg[n:]
		num, wire := tag>>3, tag&7
		if num == 0 {
			return 0, errors.New("HealthCheckResponse: field number 0")
		}
		switch wire {
		case 0: // varint
			v, n := binary.Uvarint(msg)
			if n <= 0 {
				return 0, fmt.Errorf("HealthCheckResponse: malformed varint in field %d", num)
			}
			msg = msg[n:]
			if num == 1 {
				status = v
			}
			continue
		case 1: // 64-bit
			n = 8
		case 5: // 32-bit
			n = 4
		case 2: // length-delimited
			l, m := binary.Uvarint(msg)
			if m <= 0 || l > uint64(len(msg)-m) {
				return 0, fmt.Errorf("HealthCheckResponse: malformed length in field %d", num)
			}
			msg, n = msg[m:], int(l)
		default: // groups (3, 4) are long deprecated; 6 and 7 do not exist
			return 0, fmt.Errorf("HealthCheckResponse: field %d has wire type %d, which relay does not read", num, wire)
		}
		if num == 1 {
			return 0, fmt.Errorf("HealthCheckResponse: status (field 1) has wire type %d, not varint", wire)
		}
		if n > len(msg) {
			return 0, fmt.Errorf("HealthCheckResponse: field %d cut short", num)
		}
		msg = msg[n:]
	}
	return status, nil
}

// percentDecode undoes grpc-message's percent-encoding; a malformed
// escape is kept as it is, as gRPC's own readers do.
func percentDecode(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			return percentDecodeFrom(s, i)
		}
	}
	return s
}

func percentDecodeFrom(s string, i int) string {
	b := []byte(s[:i])
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, lo := unhex(s[i+1]), unhex(s[i+2])
			if hi >= 0 && lo >= 0 {
				b = append(b, byte(hi<<4|lo))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// unhex is the value of hex digit c, -1 if it is none.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
