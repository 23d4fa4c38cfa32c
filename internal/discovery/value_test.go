package discovery

import (
	"strings"
	"testing"
)

func TestParseReadsABackend(t *testing.T) {
	long := strings.Repeat("p", 64) // the longest pool name allowed
	for _, c := range []struct {
		value  string
		url    string
		weight int
		pool   string
	}{
		{`{"url": "http://10.0.0.5:8080", "weight": 2}`, "http://10.0.0.5:8080", 2, "default"},
		{`{"url": "http://10.0.0.5:8080"}`, "http://10.0.0.5:8080", 1, "default"},
		{`{"url": "https://api.internal:443", "weight": 256}`, "https://api.internal:443", 256, "default"},
		{` {"weight": 3, "url": "http://127.0.0.1:9000/"} `, "http://127.0.0.1:9000", 3, "default"},
		{`{"url": "http://10.0.0.5:8080", "weight": 2, "pool": "api"}`, "http://10.0.0.5:8080", 2, "api"},
		{`{"pool": "static-v2_a", "url": "http://10.0.0.5:8080"}`, "http://10.0.0.5:8080", 1, "static-v2_a"},
		{`{"url": "http://10.0.0.5:8080", "pool": "default"}`, "http://10.0.0.5:8080", 1, "default"},
		{`{"url": "http://10.0.0.5:8080", "pool": "9"}`, "http://10.0.0.5:8080", 1, "9"},
		{`{"url": "http://10.0.0.5:8080", "pool": "` + long + `"}`, "http://10.0.0.5:8080", 1, long},
		{`{"url": "http://10.0.0.5:8080", "pool": null}`, "http://10.0.0.5:8080", 1, "default"},
	} {
		b, err := Parse("/relay/backends/a", []byte(c.value))
		if err != nil {
			t.Errorf("%s: %v", c.value, err)
			continue
		}
		if b.Key != "/relay/backends/a" || b.URL != c.url || b.Weight != c.weight || b.Pool != c.pool {
			t.Errorf("%s: got %+v, want url %s weight %d pool %s", c.value, b, c.url, c.weight, c.pool)
		}
	}
}

func TestParseNamesWhatIsWrong(t *testing.T) {
	const nameRule = "pool: pool names are 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit"
	for _, c := range []struct{ value, want string }{
		{``, "is not a backend"},
		{`http://10.0.0.5:8080`, "is not a backend"},
		{`{"url": "http://10.0.0.5:8080", "wieght": 2}`, `unknown field "wieght"`},
		{`{"url": "http://10.0.0.5:8080", "pools": "api"}`, `unknown field "pools"`},
		{`{"weight": 2}`, `no "url"`},
		{`{"url": "10.0.0.5:8080"}`, "url:"},
		{`{"url": "ftp://10.0.0.5:8080"}`, "url:"},
		{`{"url": "http://10.0.0.5:8080", "weight": -1}`, "weight -1 is outside"},
		{`{"url": "http://10.0.0.5:8080", "weight": 0}`, "weight 0 is outside"},
		{`{"url": "http://10.0.0.5:8080", "weight": 100000}`, "weight 100000 is outside"},
		{`{"url": "http://10.0.0.5:8080", "weight": "2"}`, "is not a backend"},
		{`{"url": "http://10.0.0.5:8080", "pool": ""}`, `pool is empty; leave the field out for the pool "default"`},
		{`{"url": "http://10.0.0.5:8080", "pool": "API"}`, `(they become metric labels), got "API"`},
		{`{"url": "http://10.0.0.5:8080", "pool": "-api"}`, `(they become metric labels), got "-api"`},
		{`{"url": "http://10.0.0.5:8080", "pool": "a.b"}`, `(they become metric labels), got "a.b"`},
		{`{"url": "http://10.0.0.5:8080", "pool": "a b"}`, nameRule},
		{`{"url": "http://10.0.0.5:8080", "pool": "` + strings.Repeat("p", 65) + `"}`, nameRule},
		{`{"url": "http://10.0.0.5:8080", "pool": 2}`, "is not a backend"},
		{`{"url": "http://10.0.0.5:8080", "pool": ["api"]}`, "is not a backend"},
		{`{"url": "http://a:1"} {"url": "http://b:1"}`, "more than one JSON object"},
		{`{"url": "http://a:1", "pad": "` + strings.Repeat("x", 5000) + `"}`, "at most 4096"},
		{`{"url": "http://a:1", "pool": "` + strings.Repeat("x", 5000) + `"}`, "at most 4096"},
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
	for _, c := range []struct {
		value []byte
		json  string
		pool  string
	}{
		{Marshal("http://127.0.0.1:8001", 7), `{"url":"http://127.0.0.1:8001","weight":7}`, "default"},
		{MarshalPool("http://127.0.0.1:8001", 7, "default"), `{"url":"http://127.0.0.1:8001","weight":7}`, "default"},
		{MarshalPool("http://127.0.0.1:8001", 7, "api"), `{"url":"http://127.0.0.1:8001","weight":7,"pool":"api"}`, "api"},
	} {
		if string(c.value) != c.json {
			t.Errorf("marshalled %s, want %s", c.value, c.json)
		}
		b, err := Parse("k", c.value)
		if err != nil || b.URL != "http://127.0.0.1:8001" || b.Weight != 7 || b.Pool != c.pool {
			t.Errorf("%s: got %+v, %v", c.value, b, err)
		}
	}
}

func TestPoolKeyFor(t *testing.T) {
	for _, c := range []struct{ pool, want string }{
		{"default", "/relay/backends/10.0.0.5:8080"},
		{"api", "/relay/backends/api/10.0.0.5:8080"},
	} {
		if got := PoolKeyFor("/relay/backends/", c.pool, "http://10.0.0.5:8080"); got != c.want {
			t.Errorf("pool %s: key %s, want %s", c.pool, got, c.want)
		}
	}
}
