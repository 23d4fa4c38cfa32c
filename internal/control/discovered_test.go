package control

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"relay/internal/supervisor"
	"relay/internal/testlog"
)

// TestDiscoveredMembersJoinBesideTheFile: etcd's set is laid beside the
// file's and the API's members; the file wins a clash; an operator's
// weight holds until etcd announces another; an etcd member cannot be
// removed through the API; a reload keeps the discovered members.
func TestDiscoveredMembersJoinBesideTheFile(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 100, slog.New(slog.DiscardHandler))
	if _, err := l.Add("default", "http://127.0.0.1:8002", 1); err != nil {
		t.Fatal(err)
	}
	etcd := func(url string, weight int) supervisor.Member {
		return supervisor.Member{Pool: "default", URL: url, Weight: weight, From: supervisor.FromEtcd, Key: "/relay/backends/" + url[len(url)-4:]}
	}
	members := func() string {
		var s string
		for _, m := range l.members {
			s += fmt.Sprintf("%s=%d/%s ", m.URL[len(m.URL)-4:], m.Weight, m.Source())
		}
		return s
	}
	expect := func(want string) {
		t.Helper()
		if got := members(); got != want {
			t.Fatalf("members %q, want %q", got, want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Discovered([]supervisor.Member{etcd("http://127.0.0.1:8001", 5), etcd("http://127.0.0.1:8003", 2), etcd("http://127.0.0.1:8004", 1)}))
	expect("8001=1/file 8002=1/api 8003=2/etcd 8004=1/etcd ")

	must(l.SetWeight("default", "http://127.0.0.1:8003", 7))
	must(l.Discovered([]supervisor.Member{etcd("http://127.0.0.1:8003", 2), etcd("http://127.0.0.1:8004", 3)}))
	expect("8001=1/file 8002=1/api 8003=7/etcd 8004=3/etcd ")
	must(l.Discovered([]supervisor.Member{etcd("http://127.0.0.1:8003", 4), etcd("http://127.0.0.1:8004", 3)}))
	expect("8001=1/file 8002=1/api 8003=4/etcd 8004=3/etcd ")

	if err := l.Remove("default", "http://127.0.0.1:8004"); err == nil || !errors.Is(err, ErrConflict) {
		t.Fatalf("removing an etcd member through the API: %v, want a conflict naming its key", err)
	}
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(100), []supervisor.Member{{Pool: "default", URL: "http://127.0.0.1:8005", Weight: 1}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	expect("8005=1/file 8003=4/etcd 8004=3/etcd ")
	must(l.Discovered([]supervisor.Member{etcd("http://127.0.0.1:8004", 3)}))
	expect("8005=1/file 8004=3/etcd ")
	must(l.Discovered(nil))
	expect("8005=1/file ")
}

// TestADiscoveredMemberLeftOutComesBack: etcd announces a URL the file or
// the API has; when the file drops it, or the API removes it, etcd's
// member serves, with no change in etcd needed.
func TestADiscoveredMemberLeftOutComesBack(t *testing.T) {
	log, logs := testlog.New()
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 100, log)
	a, b := supervisor.Member{Pool: "default", URL: "http://127.0.0.1:8001", Weight: 4, From: supervisor.FromEtcd, Key: "/k/a"}, supervisor.Member{Pool: "default", URL: "http://127.0.0.1:8002", Weight: 1, From: supervisor.FromEtcd, Key: "/k/b"}
	if err := l.Discovered([]supervisor.Member{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := l.Discovered([]supervisor.Member{a, b, {Pool: "default", URL: "http://127.0.0.1:8003", Weight: 1, From: supervisor.FromEtcd, Key: "/k/c"}}); err != nil {
		t.Fatal(err)
	}
	if n := logs.Count("left out"); n != 1 {
		t.Errorf("the clash was logged %d times over two sets, want once:\n%s", n, logs.String())
	}
	if _, err := l.Add("default", "http://127.0.0.1:8002", 9); err == nil {
		t.Fatal("the API added a URL etcd's member has")
	}
	// The file drops 8001: etcd's 8001 takes its place.
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(100), nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]supervisor.Member{}
	for _, m := range l.members {
		got[m.URL] = m
	}
	if m := got[a.URL]; m.From != supervisor.FromEtcd || m.Weight != 4 || len(got) != 3 {
		t.Fatalf("after the file dropped %s the members are %+v; want etcd's, weight 4, beside the two others", a.URL, l.members)
	}
	// An operator's weight on it holds through an unrelated etcd change.
	if err := l.SetWeight("default", a.URL, 9); err != nil {
		t.Fatal(err)
	}
	if err := l.Discovered([]supervisor.Member{a, b}); err != nil {
		t.Fatal(err)
	}
	if w := weightOf(l, a.URL); w != 9 {
		t.Fatalf("the operator's weight 9 became %d on an etcd change that did not touch %s", w, a.URL)
	}
	// The file takes it back: the clash is logged again.
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 3}, defaultPool(100), []supervisor.Member{{Pool: "default", URL: a.URL, Weight: 1}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := logs.Count("left out"); n != 2 {
		t.Errorf("%d clash lines after the file took %s back, want 2:\n%s", n, a.URL, logs.String())
	}
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 4}, defaultPool(100), nil, nil, nil); err != nil {
		t.Fatal(err)
	}

	// The API has 8009 before etcd announces it; the API removes it:
	// etcd's 8009 takes its place.
	if _, err := l.Add("default", "http://127.0.0.1:8009", 2); err != nil {
		t.Fatal(err)
	}
	x := supervisor.Member{Pool: "default", URL: "http://127.0.0.1:8009", Weight: 7, From: supervisor.FromEtcd, Key: "/k/x"}
	if err := l.Discovered([]supervisor.Member{a, b, x}); err != nil {
		t.Fatal(err)
	}
	if err := l.Remove("default", x.URL); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range l.members {
		if m.URL == x.URL {
			found = m.From == supervisor.FromEtcd && m.Weight == 7
		}
	}
	if !found {
		t.Fatalf("after the API removed %s the members are %+v; want etcd's, weight 7", x.URL, l.members)
	}
}

func weightOf(l *Control, url string) int {
	for _, m := range l.members {
		if m.URL == url {
			return m.Weight
		}
	}
	return 0
}
