package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"relay/internal/config"
	"relay/internal/discovery"
	"relay/internal/etcdtest"
	"relay/internal/testaddr"
	"relay/internal/testlog"
)

// under returns every key under prefix with its value.
func under(t *testing.T, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	kvs := map[string]string{}
	for _, kv := range r.Kvs {
		kvs[string(kv.Key)] = string(kv.Value)
	}
	return kvs
}

// awaitKey waits until key is under prefix and returns its value; it fails
// the test when anything else is there.
func awaitKey(t *testing.T, cli *clientv3.Client, prefix, key string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		kvs := under(t, cli, prefix)
		if v, ok := kvs[key]; ok && len(kvs) == 1 {
			return v
		}
		if len(kvs) > 0 || time.Now().After(deadline) {
			t.Fatalf("under %s etcd holds %q, want just %s", prefix, kvs, key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends r the graceful way and wants exit 0.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if code := r.exitCode(t, "cancelling run's context"); code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, r.log)
	}
}

func TestRegister(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client()

	t.Run("defaults", func(t *testing.T) {
		// All interfaces on a port picked by the system: the announced URL
		// is loopback on the port really listened on.
		r := start(t, nil, "-port", "0", "-register", etcd.Endpoint, "-weight", "3")
		_, port, _ := net.SplitHostPort(r.addr)
		key := "/relay/backends/127.0.0.1:" + port
		if got, want := awaitKey(t, cli, "/relay/backends/", key), fmt.Sprintf(`{"url":"http://127.0.0.1:%s","weight":3}`, port); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
		if code, _ := r.get(t, "/"); code != 200 {
			t.Errorf("GET / = %d while registered", code)
		}
		r.stop(t)
		// Revoked on the way out, not left to the 10s lease.
		if kvs := under(t, cli, "/relay/backends/"); len(kvs) != 0 {
			t.Errorf("after a graceful stop etcd still holds %q", kvs)
		}
		if !strings.Contains(r.log.String(), "withdrawn from etcd") {
			t.Errorf("the withdrawal is not logged:\n%s", r.log)
		}
	})

	t.Run("listen host, key, advertise and prefix", func(t *testing.T) {
		r := start(t, nil, "-addr", "127.0.0.1:0", "-register", " "+etcd.Endpoint+", ",
			"-register-prefix", "/t/", "-register-ttl", "2s", "-quiet")
		_, port, _ := net.SplitHostPort(r.addr)
		if got, want := awaitKey(t, cli, "/t/", "/t/127.0.0.1:"+port), `{"url":"http://127.0.0.1:`+port+`","weight":1}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
		r.stop(t)

		r = start(t, nil, "-addr", "127.0.0.1:0", "-register", etcd.Endpoint, "-register-prefix", "/t/",
			"-register-key", "b1", "-advertise", "http://LOCALHOST:9001", "-quiet")
		if got, want := awaitKey(t, cli, "/t/", "/t/b1"), `{"url":"http://localhost:9001","weight":1}`; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
		r.stop(t)
		if kvs := under(t, cli, "/t/"); len(kvs) != 0 {
			t.Errorf("after a graceful stop etcd still holds %q", kvs)
		}
		if s := r.log.String(); s != "" {
			t.Errorf("-quiet still logged %q", s)
		}
	})
}

// TestRegisterInAPool: a server registered with -pool api is a backend of
// pool api for a relay's watcher of the same prefix, under a key of its
// own beside the same address in the default pool.
func TestRegisterInAPool(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client()
	const prefix = "/p/"
	r := start(t, nil, "-addr", "127.0.0.1:0", "-register", etcd.Endpoint, "-register-prefix", prefix, "-pool", "api", "-weight", "2", "-quiet")
	_, port, _ := net.SplitHostPort(r.addr)
	url := "http://127.0.0.1:" + port
	key := prefix + "api/127.0.0.1:" + port
	if got, want := awaitKey(t, cli, prefix, key), `{"url":"`+url+`","weight":2,"pool":"api"}`; got != want {
		t.Errorf("%s = %s, want %s", key, got, want)
	}
	// The same address in the default pool, as another registration
	// would put it: its key does not overwrite the server's.
	etcd.Put(cli, prefix+"127.0.0.1:"+port, string(discovery.Marshal(url, 1)))

	sets := make(chan []discovery.Backend, 16)
	log, _ := testlog.New()
	w := discovery.Watch(&config.Etcd{Endpoints: []string{etcd.Endpoint}, Prefix: prefix, DialTimeout: 2 * time.Second}, log,
		func(set []discovery.Backend) error { sets <- set; return nil }, nil)
	defer w.Stop()
	want := []discovery.Backend{
		{Key: prefix + "127.0.0.1:" + port, Pool: config.DefaultPool, URL: url, Weight: 1},
		{Key: key, Pool: "api", URL: url, Weight: 2},
	}
	deadline := time.After(5 * time.Second)
	for got := []discovery.Backend(nil); !slices.Equal(got, want); {
		select {
		case got = <-sets:
		case <-deadline:
			t.Fatalf("the watcher's set is %+v, want %+v", got, want)
		}
	}

	r.stop(t)
	deadline = time.After(5 * time.Second)
	for got := []discovery.Backend(nil); !slices.Equal(got, want[:1]); {
		select {
		case got = <-sets:
		case <-deadline:
			t.Fatalf("after the server stopped the watcher's set is %+v, want %+v", got, want[:1])
		}
	}
}

// TestRegisterWithoutEtcd: no etcd answering does not keep the server from
// serving, nor from stopping at once.
func TestRegisterWithoutEtcd(t *testing.T) {
	nobody := "http://" + testaddr.Refused(t)
	r := start(t, nil, "-addr", "127.0.0.1:0", "-register", nobody)
	if code, body := r.get(t, "/"); code != 200 || !strings.HasPrefix(body, "Hello World") {
		t.Errorf("GET / = %d %q with etcd unreachable", code, body)
	}
	began := time.Now()
	r.stop(t)
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("stopping took %v with etcd unreachable", d)
	}
}

func TestRegisterFlags(t *testing.T) {
	const ep = "http://127.0.0.1:2379"
	tests := []struct {
		args []string
		flag string // the flag the message must name
	}{
		{[]string{"-register", "127.0.0.1:2379"}, "-register"},
		{[]string{"-register", "ftp://127.0.0.1:2379"}, "-register"},
		{[]string{"-register", ep + ",http://127.0.0.1"}, "-register"},
		{[]string{"-register", " , "}, "-register"},
		{[]string{"-register", ep, "-register-ttl", "1s"}, "-register-ttl"},
		{[]string{"-register", ep, "-register-ttl", "10"}, "-register-ttl"},
		{[]string{"-register", ep, "-weight", "0"}, "-weight"},
		{[]string{"-register", ep, "-weight", "1001"}, "-weight"},
		{[]string{"-register", ep, "-advertise", "nope"}, "-advertise"},
		{[]string{"-register", ep, "-advertise", "http://127.0.0.1:8001/path"}, "-advertise"},
		{[]string{"-register", ep, "-register-prefix", ""}, "-register-prefix"},
		{[]string{"-weight", "2"}, "-weight"},
		{[]string{"-advertise", "http://127.0.0.1:8001"}, "-advertise"},
		{[]string{"-register", ep, "-pool", "API"}, "-pool"},
		{[]string{"-pool", "api"}, "-pool"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		// Should it start after all, ready stops it again rather than hang.
		args := append([]string{"-addr", "127.0.0.1:0"}, tt.args...)
		code := run(ctx, args, func(string) string { return "" }, &out, func(string) { cancel() })
		cancel()
		if code != 2 || !strings.Contains(out.String(), tt.flag+":") {
			t.Errorf("%q: exit %d, output %q; want 2 and a message naming %s", tt.args, code, out.String(), tt.flag)
		}
	}
}

// TestRegisterPoolFlag: -pool takes what relay takes as a pool's name, and
// says what a name may be when it refuses one.
func TestRegisterPoolFlag(t *testing.T) {
	const ep = "http://127.0.0.1:2379"
	const rule = "-pool: pool names are 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit (they become metric labels), got "
	for _, tt := range []struct {
		args []string
		say  string // "" when the flags are accepted
	}{
		{[]string{"-register", ep, "-pool", "api"}, ""},
		{[]string{"-register", ep, "-pool", "default"}, ""},
		{[]string{"-register", ep, "-pool", "v2_static-0"}, ""},
		{[]string{"-register", ep, "-pool", strings.Repeat("p", 64)}, ""},
		{[]string{"-register", ep, "-pool", "API"}, rule + `"API"`},
		{[]string{"-register", ep, "-pool", ""}, rule + `""`},
		{[]string{"-register", ep, "-pool", "_api"}, rule + `"_api"`},
		{[]string{"-register", ep, "-pool", "api/v2"}, rule + `"api/v2"`},
		{[]string{"-register", ep, "-pool", strings.Repeat("p", 65)}, rule + `"ppppp`},
		{[]string{"-pool", "api"}, "-pool: means something only with -register ENDPOINTS, which is not given"},
	} {
		var reg registration
		fs := flag.NewFlagSet("server", flag.ContinueOnError)
		reg.flags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		err := reg.check(set)
		switch {
		case tt.say == "" && err != nil:
			t.Errorf("%q: refused: %v", tt.args, err)
		case tt.say != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.say)):
			t.Errorf("%q: error %v, want %s...", tt.args, err, tt.say)
		}
	}
}
