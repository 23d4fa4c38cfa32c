package core

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/fds"
)

// Idle connections reclaimed for a spent budget while pools change their
// members and close their idle connections: no deadlock, no race, and
// every place taken is given back once.
func TestReclaimWhilePoolsChange(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted []net.Conn
	var amu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			amu.Lock()
			accepted = append(accepted, c)
			amu.Unlock()
		}
	}()
	defer func() {
		amu.Lock()
		for _, c := range accepted {
			c.Close()
		}
		amu.Unlock()
	}()
	budget := fds.New(3)
	c := New(Config{Descriptors: budget})
	var pools []*Pool
	for _, name := range []string{"a", "b"} {
		p, err := c.AddPool(poolConfig(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
	}
	newMember := func() *backend.Backend {
		b, err := backend.New(&url.URL{Scheme: "http", Host: ln.Addr().String()}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, p := range pools {
		p.SetBackends([]*backend.Backend{newMember()})
	}
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := pools[w%2]
			for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
				st := p.state.Load()
				for _, cs := range st.conns {
					u, _, err := cs.get(time.Now())
					if err != nil {
						continue // spent, or the pool changed
					}
					cs.put(u, time.Now())
				}
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
			pools[i%2].SetBackends([]*backend.Backend{newMember()})
			pools[(i+1)%2].closeIdle()
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
			if budget.Take() {
				budget.Give()
			}
			budget.Short()
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock: reclaiming and changing pools did not finish")
	}
	for _, p := range pools {
		p.closeIdle()
	}
	t.Logf("%d takes refused", budget.Refused())
	if n := budget.Used(); n != 0 {
		t.Fatalf("%d places still taken with every connection closed", n)
	}
	if n := c.pooled.Load(); n != 0 {
		t.Fatalf("the core counts %d pooled connections with none left", n)
	}
}
