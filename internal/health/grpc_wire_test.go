package health

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestGRPCRequestBody(t *testing.T) {
	if got, want := grpcRequestBody(""), []byte{0, 0, 0, 0, 0}; !bytes.Equal(got, want) {
		t.Errorf("overall health: % x, want % x", got, want)
	}
	if got, want := grpcRequestBody("svc"), []byte{0, 0, 0, 0, 5, 0x0a, 3, 's', 'v', 'c'}; !bytes.Equal(got, want) {
		t.Errorf("service svc: % x, want % x", got, want)
	}
	long := strings.Repeat("s", 200) // a length that takes two varint bytes
	if got := grpcRequestBody(long); !bytes.Equal(got[:8], []byte{0, 0, 0, 0, 203, 0x0a, 0xc8, 0x01}) {
		t.Errorf("a 200-byte service: % x", got[:8])
	}
}

// TestServingStatus decodes HealthCheckResponses by hand, skipping the
// fields it does not know and refusing what is not protobuf.
func TestServingStatus(t *testing.T) {
	tests := []struct {
		name   string
		msg    []byte
		want   uint64
		errHas string
	}{
		{name: "serving", msg: []byte{0x08, 1}, want: 1},
		{name: "not serving", msg: []byte{0x08, 2}, want: 2},
		{name: "empty is UNKNOWN", msg: nil, want: 0},
		{name: "the last status wins", msg: []byte{0x08, 2, 0x08, 1}, want: 1},
		{name: "unknown fields of every wire type are skipped",
			msg: []byte{0x10, 0x96, 0x01, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x22, 2, 'h', 'i', 0x2d, 1, 2, 3, 4, 0x08, 1}, want: 1},
		{name: "an unknown field with a two-byte tag", msg: []byte{0x80, 0x01, 7, 0x08, 1}, want: 1},
		{name: "a status of two varint bytes", msg: []byte{0x08, 0x80, 0x01}, want: 128},
		{name: "a cut varint", msg: []byte{0x08, 0x80}, errHas: "malformed varint in field 1"},
		{name: "a cut tag", msg: []byte{0x80}, errHas: "malformed field tag"},
		{name: "field number 0", msg: []byte{0x00, 1}, errHas: "field number 0"},
		{name: "a length past the end", msg: []byte{0x22, 5, 'h'}, errHas: "malformed length in field 4"},
		{name: "a cut fixed64", msg: []byte{0x19, 1, 2}, errHas: "field 3 cut short"},
		{name: "a group", msg: []byte{0x1b, 0x1c}, errHas: "wire type 3"},
		{name: "status as bytes", msg: []byte{0x0a, 1, 1}, errHas: "status (field 1) has wire type 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := servingStatus(tt.msg)
			switch {
			case tt.errHas == "" && err != nil:
				t.Fatal(err)
			case tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)):
				t.Fatalf("error %v, want one with %q", err, tt.errHas)
			case tt.errHas == "" && got != tt.want:
				t.Fatalf("status %d, want %d", got, tt.want)
			}
		})
	}
}

func TestGRPCMessage(t *testing.T) {
	big := append([]byte{0, 0, 0, 0x10, 0x01}, make([]byte, 4097)...)
	tests := []struct {
		name   string
		body   []byte
		errHas string
	}{
		{name: "one message", body: []byte{0, 0, 0, 0, 2, 0x08, 1}},
		{name: "an empty message", body: []byte{0, 0, 0, 0, 0}},
		{name: "no message", body: nil, errHas: "no response message"},
		{name: "a cut prefix", body: []byte{0, 0, 0}, errHas: "3 bytes of its 5-byte prefix"},
		{name: "compressed", body: []byte{1, 0, 0, 0, 2, 0x08, 1}, errHas: "compressed flag 1"},
		{name: "cut short", body: []byte{0, 0, 0, 0, 3, 0x08, 1}, errHas: "2 of its 3 bytes"},
		{name: "two messages", body: []byte{0, 0, 0, 0, 2, 0x08, 1, 0, 0, 0, 0, 0}, errHas: "more than one"},
		{name: "over 4 KiB", body: big, errHas: "4097 bytes is over the limit of 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcMessage(tt.body)
			if (tt.errHas == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("error %v, want %q", err, tt.errHas)
			}
		})
	}
}

func TestGRPCTimeoutAndMessage(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Second: "2000m", 0: "1m", -time.Second: "1m", 30 * time.Hour: "108000S"} {
		if got := grpcTimeout(d); got != want {
			t.Errorf("grpcTimeout(%v) = %q, want %q", d, got, want)
		}
	}
	for in, want := range map[string]string{"unknown service": "unknown service", "a%20b%2": "a b%2", "%zz%C3%A9": "%zzé"} {
		if got := percentDecode(in); got != want {
			t.Errorf("percentDecode(%q) = %q, want %q", in, got, want)
		}
	}
}
