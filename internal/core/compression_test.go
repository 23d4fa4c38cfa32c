package core

import (
	"testing"

	"relay/internal/compress"
	"relay/internal/h1"
)

// The ETag of a response gets its coding's suffix even when adding Vary
// moves the response's fields: a head whose fields fill their slice, as
// a reused exchange's may, is the case that used to lose the suffix (the
// suffix went to the fields' old place).
func TestCompressionTagsSurviveVary(t *testing.T) {
	p, err := compress.New(compress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCompression(p)
	for _, tc := range []struct {
		name   string
		status int
		cond   string
	}{
		{"200", 200, ""},
		{"304 to a revalidation of the coded copy", 304, "If-None-Match: \"v1-gzip\"\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req h1.Request
			head := "GET / HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n" + tc.cond + "\r\n"
			if err := h1.ParseRequest([]byte(head), &req); err != nil {
				t.Fatal(err)
			}
			x := &Exchange{Req: &req}
			c.UpstreamHead(x, nil)
			fields := []h1.Field{
				{Name: []byte("Content-Type"), Value: []byte("text/html")},
				{Name: []byte("ETag"), Value: []byte(`"v1"`)},
			}
			resp := &h1.Response{Status: tc.status, Fields: fields[:2:2], Body: h1.BodyLength, ContentLength: 4096}
			if tc.status == 304 {
				resp.Body, resp.ContentLength = h1.BodyNone, 0
			}
			c.ResponseHead(x, resp)
			defer x.respBody.endFilter()
			var etag string
			for _, f := range resp.Fields {
				if f.Is("etag") && !f.Hop {
					etag = string(f.Value)
				}
			}
			if etag != `"v1-gzip"` {
				t.Errorf("the %d's ETag is %s, want \"v1-gzip\"", tc.status, etag)
			}
		})
	}
}
