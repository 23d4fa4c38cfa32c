package discovery

import (
	"strings"
	"testing"
)

func TestParseReadsABackend(t *testing.T) {
	for _, c := range []struct {
		value  string
		url    string
		weight int
	}{
		{`{"url": "http://10.0.0.5:8080", "weight": 2}`, "http://10.0.0.5:8080", 2},
		{`{"url": "http://10.0.0.5:8080"}`, "http://10.0.0.5:8080", 1},
		{`{"url": "https://api.internal:443", "weight": 256}`, "https://api.internal:443", 256},
		{` {"weight": 3, "url": "http://127.0.0.1:9000/"} `, "http://127.0.0.1:9000", 3},
	} {
		b, err := Parse("/relay/backends/a", []byte(c.value))
		if err != nil {
			t.Errorf("%s: %v", c.value, err)
			continue
		}
		if b.Key != "/relay/backends/a" || b.URL != c.url || b.Weight != c.weight {
			t.Errorf("%s: got %+v, want url %s weight %d", c.value, b, c.url, c.weight)
		}
	}
}

func TestParseNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{``, "is not a backend"},
		{`http://10.0.0.5:8080`, "is not a backend"},
		{`{"url": "http://10.0.0.5:8080", "wieght": 2}`, `unknown field "wieght"`},
		{`{"weight": 2}`, `no "url"`},
		{`{"url": "10.0.0.5:8080"}`, "url:"},
		{`{"url": "ftp://10.0.0.5:8080"}`, "url:"},
		{`{"url": "http://10.0.0.5:8080", "weight": -1}`, "weight -1 is outside"},
		{`{"url": "http://10.0.0.5:8080", "weight": 0}`, "weight 0 is outside"},
		{`{"url": "http://10.0.0.5:8080", "weight": 100000}`, "weight 100000 is outside"},
		{`{"url": "http://10.0.0.5:8080", "weight": "2"}`, "is not a backend"},
		{`{"url": "http://a:1"} {"url": "http://b:1"}`, "more than one JSON object"},
		{`{"url": "http://a:1", "pad": "` + strings.Repeat("x", 5000) + `"}`, "at most 4096"},
	} {
		_, err := Parse("/relay/backends/k1", []byte(c.value))
		if err == nil {
			t.Errorf("%.60s: accepted", c.value)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"/relay/backends/k1"`) {
			t.Errorf("%.60s: error %q, want it to name the key and say %q", c.value, err, c.want)
		}
	}
}

func TestMarshalParsesBack(t *testing.T) {
	b, err := Parse("k", Marshal("http://127.0.0.1:8001", 7))
	if err != nil || b.URL != "http://127.0.0.1:8001" || b.Weight != 7 {
		t.Fatalf("got %+v, %v", b, err)
	}
}
