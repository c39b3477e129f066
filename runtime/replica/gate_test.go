package replica

import (
	"context"
	"testing"
	"time"
)

// waits reports whether g.wait blocks for at least d.
func waits(t *testing.T, g *readGate, d time.Duration) bool {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), d)
	defer cancel()
	return g.wait(ctx) != nil
}

func TestReadGateHolds(t *testing.T) {
	var g readGate
	if waits(t, &g, 10*time.Millisecond) {
		t.Fatal("a gate never held holds")
	}
	var r1 = g.hold(time.Hour)
	var r2 = g.hold(time.Hour)
	if !waits(t, &g, 10*time.Millisecond) {
		t.Fatal("a held gate does not hold")
	}
	r1()
	r1() // Once only: the other hold stands.
	if !waits(t, &g, 10*time.Millisecond) {
		t.Fatal("a gate of one hold left does not hold")
	}
	var released = make(chan error)
	go func() { released <- g.wait(context.Background()) }()
	time.Sleep(5 * time.Millisecond)
	r2()
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter was not released with the last hold")
	}
	// A hold not released ends after its bound.
	g.hold(20 * time.Millisecond)
	if !waits(t, &g, 5*time.Millisecond) {
		t.Fatal("a held gate does not hold")
	}
	if err := g.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if waits(t, &g, 10*time.Millisecond) {
		t.Fatal("a hold outlived its bound")
	}
}

func TestSplitHoldReleasesAsALaterFinalizeStartsItsCommit(t *testing.T) {
	var g readGate
	var h splitHold
	var before = time.Now()
	h.take(&g, "shard-a")
	h.take(&g, "shard-a") // One hold at most.
	h.finalized(before)   // Began to finalize before the hold: it did not split.
	if !waits(t, &g, 10*time.Millisecond) || !h.taken() {
		t.Fatal("released as a transaction that began to finalize before the hold started its commit")
	}
	h.finalized(time.Now())
	if waits(t, &g, 10*time.Millisecond) || h.taken() {
		t.Fatal("not released as a transaction that began to finalize after the hold started its commit")
	}
	if g.held.Load() != 0 {
		t.Fatalf("%d holds left", g.held.Load())
	}
}
