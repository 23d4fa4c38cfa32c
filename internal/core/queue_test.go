package core

import (
	"testing"
	"time"
)

func never() bool { return false }

// A request that ends while another picks (and finds no place) wakes
// nobody: the queue is still empty. The picker must not then wait for a
// wake that already happened; it picks again without having had a turn,
// so if it finds no place it queues behind those already waiting.
func TestWakeBetweenPickAndQueueIsNotLost(t *testing.T) {
	var q queue
	seen := q.seq.Load() // read before the pick round
	q.wake()             // a request ends: nobody waits yet
	start := time.Now()
	if end := q.wait(time.Now().Add(5*time.Second), 10, false, seen, never); end != recheck {
		t.Fatalf("wait ended %d, want recheck", end)
	}
	if d := time.Since(start); d > queueTick/2 {
		t.Errorf("woken after %v, want at once", d)
	}
	if q.Len() != 0 {
		t.Errorf("%d left queued", q.Len())
	}
}

// Places that open without a request ending are found by the longest
// waiter looking every tick; the others keep their turn and only wait.
func TestOnlyTheLongestWaiterLooksEveryTick(t *testing.T) {
	var q queue
	head := make(chan bool, 1) // a waiter ahead that never looks
	q.waiters = append(q.waiters, head)
	q.n.Store(1)
	if end := q.wait(time.Now().Add(3*queueTick+queueTick/2), 10, false, 0, never); end != timedOut {
		t.Errorf("a waiter behind another ended %d, want timedOut: only the longest waiter looks", end)
	}
	q.leave(head)
	start := time.Now()
	if end := q.wait(time.Now().Add(5*time.Second), 10, false, 0, never); end != ticked {
		t.Errorf("the longest waiter ended %d, want ticked", end)
	}
	if d := time.Since(start); d > 20*queueTick {
		t.Errorf("the longest waiter looked after %v, want about %v", d, queueTick)
	}
}

// A waiter whose client went away leaves the queue within a tick; a wake
// it was given goes on to the next waiter.
func TestWaiterWhoseClientLeftPassesItsTurnOn(t *testing.T) {
	var q queue
	first := make(chan waitEnd, 1)
	go func() { first <- q.wait(time.Now().Add(5*time.Second), 10, false, 0, func() bool { return true }) }()
	for q.Len() != 1 {
		time.Sleep(time.Millisecond)
	}
	// Take the waiter out as wake does, and hand it its turn a little
	// after it finds its client gone; a second waiter is behind it.
	q.mu.Lock()
	ch := q.waiters[0]
	next := make(chan bool, 1)
	q.waiters[0] = next
	q.mu.Unlock()
	time.AfterFunc(3*queueTick/2, func() { ch <- false })
	if end := <-first; end != clientGone {
		t.Errorf("the waiter ended %d, want clientGone", end)
	}
	select {
	case <-next:
	default:
		t.Fatal("the next waiter was not woken with the turn the gone one was given")
	}
	if q.Len() != 0 {
		t.Errorf("%d left queued", q.Len())
	}
}

// A full queue refuses at once; a waiter that runs out of time leaves it.
func TestQueueFullAndTimeout(t *testing.T) {
	var q queue
	if end := q.wait(time.Now().Add(time.Second), 0, false, 0, never); end != queueFull {
		t.Errorf("wait on a full queue ended %d, want queueFull", end)
	}
	// The lone waiter is the longest one: it looks every tick.
	end := q.wait(time.Now().Add(30*time.Millisecond), 1, false, 0, never)
	if end != timedOut || q.Len() != 0 {
		t.Errorf("wait ended %d with %d queued, want timedOut and none", end, q.Len())
	}
}

// A chained wake tells the woken waiter to wake the next one if it gets a
// place; a plain one, after a request ended, does not.
func TestChainedWakesSaySo(t *testing.T) {
	var q queue
	ends := make(chan waitEnd, 2)
	for range 2 {
		n := q.Len()
		go func() { ends <- q.wait(time.Now().Add(5*time.Second), 10, false, 0, never) }()
		for q.Len() != n+1 {
			time.Sleep(time.Millisecond)
		}
	}
	q.wakeWith(true)
	if end := <-ends; end != chained {
		t.Errorf("chained wake ended the wait %d, want chained", end)
	}
	q.wake()
	if end := <-ends; end != woken {
		t.Errorf("plain wake ended the wait %d, want woken", end)
	}
}
