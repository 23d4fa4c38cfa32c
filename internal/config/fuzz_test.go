package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds arbitrary bytes to Parse. Whatever comes in, Parse must not
// panic; a rejection must be a non-empty *Errors; and an accepted Config must
// validate again, and survive being written back out as YAML and parsed
// anew unchanged, which catches normal forms that do not parse back.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"../../examples/original.yml", "../../examples/config.yml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"backends: [http://127.0.0.1:1, {url: 'http://[::1]:2', weight: 7}]\nlisten: '[::1]:0'\n",
		"backends:\n  - url: http://a:1\n  - url: http://A:1/\n",
		"health_check_interval: 0.25\nhealth_check_timeout: 100ms\nbackends: [http://x]\n",
		"trusted_proxies: [10.0.0.1/8, '::ffff:1.2.3.4']\nbackends: [http://x:80]\n",
		"a: &x {url: http://h}\nbackends: [*x, *x]\n",
		"port: 0x1F90\nbackends: ['http://[fe80::1%25eth0]:8080']\n",
		"backends: [http://x]\ncompress:\n  encodings: [zstd, br, gzip]\n  gzip_level: 6\n  zstd_level: best\n  min_length: 1\n  types: [text/*, 'application/*+json']\n  exclude_types: [text/csv]\n  with_cookies: true\n",
		"backends: [http://x]\ncompress: {encodings: [lz4, 7], gzip_level: often, min_length: -1, types: [text], with_cookies: yes}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yml", testOpts)
		if err != nil {
			var e *Errors
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("rejection is %T %v, want a non-empty *Errors", err, err)
			}
			for _, p := range e.Problems {
				if p.Msg == "" || p.Line < 0 || p.File != "fuzz.yml" {
					t.Fatalf("malformed problem %+v", p)
				}
			}
			return
		}
		if err := c.Validate(testOpts); err != nil {
			t.Fatalf("accepted config does not validate:\n%v", err)
		}
		if err := c.Apply(Overlay{}, testOpts); err != nil {
			t.Fatalf("accepted config fails an empty overlay:\n%v", err)
		}
		if len(c.Backends) == 0 {
			t.Fatal("accepted config has no backends")
		}
		again, err := Parse(render(t, c), "fuzz.yml", testOpts)
		if err != nil {
			t.Fatalf("rendered config does not parse:\n%s\n%v", render(t, c), err)
		}
		if a, b := comparable(c), comparable(again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the config:\n got  %+v\n want %+v", b, a)
		}
	})
}

// render writes c back out as relay YAML.
func render(t *testing.T, c *Config) []byte {
	t.Helper()
	type backend struct {
		URL    string `yaml:"url"`
		Weight int    `yaml:"weight"`
	}
	var bs []backend
	for _, b := range c.Backends {
		bs = append(bs, backend{b.URL.String(), b.Weight})
	}
	var proxies []string
	for _, p := range c.TrustedProxies {
		proxies = append(proxies, p.String())
	}
	hc := c.HealthCheck
	m := map[string]any{
		"listen": c.Listen, "port": c.Port, "algorithm": c.Algorithm, "backends": bs,
		"health_check_type": hc.Type, "health_check_path": hc.Path, "health_check_grpc_service": hc.GRPCService,
		"health_check_interval": hc.Interval.String(), "health_check_timeout": hc.Timeout.String(),
		"health_check_rise": hc.Rise, "health_check_fall": hc.Fall,
		"health_check_reuse_connection": hc.ReuseConnection,
		"trusted_proxies":               proxies,
		"log_file":                      c.LogFile, "log_max_size_mb": c.LogMaxSizeMB, "log_max_backups": c.LogMaxBackups,
		"log_max_age_days": c.LogMaxAgeDays, "log_level": c.LogLevel, "access_log": c.AccessLog,
		"connect_timeout": c.ConnectTimeout.String(), "response_timeout": c.ResponseTimeout.String(),
		"client_header_timeout": c.ClientHeaderTimeout.String(), "idle_timeout": c.IdleTimeout.String(),
		"shutdown_timeout": c.ShutdownTimeout.String(), "max_idle_conns_per_backend": c.MaxIdleConnsPerBackend,
		"max_connections": c.MaxConnections, "retries": c.Retries, "workers": c.Workers,
		"processes":        c.Processes,
		"cpu_affinity":     c.CPUAffinity,
		"max_header_bytes": c.MaxHeaderBytes,
		"admin_listen":     c.AdminListen,
	}
	if c.Compress != nil {
		// The fields the section set, under their keys: a zero field is
		// the default, and an empty list would not parse back.
		cm := map[string]any{}
		v := reflect.ValueOf(*c.Compress)
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
				cm[key] = v.Field(i).Interface()
			}
		}
		m["compress"] = cm
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// comparable strips what legitimately differs between two parses of the
// same settings: where they were written.
func comparable(c *Config) Config {
	n := *c
	n.Path, n.listenSet, n.lines, n.flags, n.undecoded = "", false, nil, nil, nil
	n.Backends = nil
	for _, b := range c.Backends {
		n.Backends = append(n.Backends, Backend{URL: b.URL, Weight: b.Weight})
	}
	if len(n.TrustedProxies) == 0 {
		n.TrustedProxies = nil
	}
	return n
}

// FuzzBackendURL aims at what FuzzParse rarely reaches: URLs that pass. An
// accepted backend URL, written out in its normal form and read again, must
// pass again and come out identical.
func FuzzBackendURL(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:8001", "http://LOCALHOST", "HTTP://[::1]:80/", "http://[fe80::1%25eth0]:8080",
		"http://[::ffff:127.0.0.1]:1", "http://host.example.:0080", "localhost:8001", "http://a_b-c.d:65535",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c := Default()
		if err := c.Apply(Overlay{Backends: []string{raw}}, testOpts); err != nil {
			return
		}
		first := c.Backends[0].URL.String()
		again := Default()
		if err := again.Apply(Overlay{Backends: []string{first}}, testOpts); err != nil {
			t.Fatalf("%q was accepted as %q, which is rejected:\n%v", raw, first, err)
		}
		if second := again.Backends[0].URL.String(); second != first {
			t.Fatalf("%q normalised to %q, then to %q", raw, first, second)
		}
	})
}
