package compress

import "testing"

func TestParseEncoding(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Encoding
		wantErr bool
	}{
		{name: "gzip", in: "gzip", want: Gzip},
		{name: "x-gzip", in: "x-gzip", want: Gzip},
		{name: "upper case", in: "GZip", want: Gzip},
		{name: "br", in: "br", want: Brotli},
		{name: "zstd", in: "zstd", want: Zstd},
		{name: "identity", in: "identity", want: Identity},
		{name: "brotli is not the token", in: "brotli", wantErr: true},
		{name: "deflate", in: "deflate", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "padded", in: " gzip", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEncoding(tt.in)
			if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
				t.Errorf("ParseEncoding(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestToken(t *testing.T) {
	tests := []struct {
		name        string
		e           Encoding
		token, text string
	}{
		{name: "identity", e: Identity, token: "", text: "identity"},
		{name: "gzip", e: Gzip, token: "gzip", text: "gzip"},
		{name: "brotli", e: Brotli, token: "br", text: "br"},
		{name: "zstd", e: Zstd, token: "zstd", text: "zstd"},
		{name: "out of range", e: Encoding(9), token: "", text: "Encoding(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.Token(); got != tt.token {
				t.Errorf("Token() = %q, want %q", got, tt.token)
			}
			if got := tt.e.String(); got != tt.text {
				t.Errorf("String() = %q, want %q", got, tt.text)
			}
			if tt.token != "" {
				if back, err := ParseEncoding(tt.token); err != nil || back != tt.e {
					t.Errorf("ParseEncoding(Token()) = %v, %v", back, err)
				}
			}
		})
	}
}
