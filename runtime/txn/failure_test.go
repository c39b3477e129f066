package txn

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"go.gazette.dev/core/message"
)

// spStore is a testStore with a map of rows and savepoints.
type spStore struct {
	*testStore
	rows, saved map[string]string
	events      []string
}

func (s *spStore) Savepoint() { s.saved = maps.Clone(s.rows); s.events = append(s.events, "savepoint") }
func (s *spStore) RollbackToSavepoint() {
	s.rows = maps.Clone(s.saved)
	s.events = append(s.events, "rollback")
}
func (s *spStore) ReleaseSavepoint() { s.saved = nil; s.events = append(s.events, "release") }

// policyApp is a testApp whose handler, under policy, writes a row of each
// message and then fails with the next of its errors, if any.
type policyApp struct {
	*testApp
	store  *spStore
	policy runtime.FailurePolicy
	errs   []error
}

func (a *policyApp) FailurePolicy(message.Message) runtime.FailurePolicy { return a.policy }

func (a *policyApp) ConsumeMessage(shard runtime.Shard, store runtime.Store, env message.Envelope, pub *message.Publisher) error {
	_ = a.testApp.ConsumeMessage(shard, store, env, pub)
	var key = env.Message.(*testMsg).Key
	a.store.rows[key] += "+"
	if len(a.errs) == 0 {
		return nil
	}
	var err = a.errs[0]
	a.errs = a.errs[1:]
	return err
}

// newPolicyHarness returns a harness whose app handles messages under
// policy, failing with errs in turn, and whose retries advance the clock
// by their backoffs, which it records.
func newPolicyHarness(t *testing.T, policy runtime.FailurePolicy, errs ...error) (*harness, *policyApp, *[]time.Duration) {
	var h = newHarness(t, false)
	var store = &spStore{testStore: h.store, rows: map[string]string{}}
	var app = &policyApp{testApp: h.app, store: store, policy: policy, errs: errs}
	h.pipeline.App, h.pipeline.Store = app, store
	var waits []time.Duration
	h.pipeline.Sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		h.clock.Advance(d)
		return nil
	}
	return h, app, &waits
}

// A handler that fails is retried, after backoffs that double, from the
// transaction as it was before each failed call; its success is kept.
func TestHandlerIsRetried(t *testing.T) {
	var failed = errors.New("not yet")
	var h, app, waits = newPolicyHarness(t, runtime.FailurePolicy{Retries: 3, Backoff: time.Second}, failed, failed)
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a", "consume a", "consume a")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(*waits, want) {
		t.Errorf("waited %v, want %v", *waits, want)
	}
	if got := app.store.rows["a"]; got != "+" {
		t.Errorf("row a = %q, want one write: a failed call's writes are undone", got)
	}
	if want := []string{"savepoint", "rollback", "release", "savepoint", "rollback", "release", "savepoint", "release"}; !slices.Equal(app.store.events, want) {
		t.Errorf("store events %v, want %v", app.store.events, want)
	}
	if s := <-h.stats; s.Messages != 1 || s.Retries != 2 || s.DeadLettered != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Once its retries are spent, a handler's error fails the shard, naming the
// journal and offset, and leaves none of its writes.
func TestHandlerFailsOnceRetriesAreSpent(t *testing.T) {
	var failed = errors.New("broken")
	var h, app, waits = newPolicyHarness(t, runtime.FailurePolicy{Retries: 2}, failed, failed, failed)
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a", "consume a", "consume a")
	var err = <-h.done
	if !errors.Is(err, failed) || !strings.Contains(err.Error(), "consuming journal test/journal offset 0: broken") {
		t.Errorf("Run = %v", err)
	}
	if want := []time.Duration{runtime.DefaultBackoff, 2 * runtime.DefaultBackoff}; !slices.Equal(*waits, want) {
		t.Errorf("waited %v, want %v", *waits, want)
	}
	if got := app.store.rows["a"]; got != "" {
		t.Errorf("row a = %q, want none", got)
	}
}

// Retries end within the transaction's maximum duration: a retry whose wait
// would end past it is not made, and the message is recorded as a dead
// letter by Skip, within the transaction, which goes on.
func TestHandlerDeadLetterWithinTheTransactionsBounds(t *testing.T) {
	var failed = errors.New("poison")
	var h, app, waits = newPolicyHarness(t, runtime.FailurePolicy{Retries: 5, Backoff: maxDur / 2, MaxBackoff: maxDur, DeadLetter: true},
		&runtime.MethodError{Method: "OnTest", Err: failed}, &runtime.MethodError{Method: "OnTest", Err: failed}, nil)
	var recorded []error
	h.pipeline.Skip = func(env message.Envelope, cause error, pub *message.Publisher) error {
		if pub != h.pipeline.Publisher || env.Message.(*testMsg).Key != "a" {
			t.Errorf("Skip of %v, publisher %p", env, pub)
		}
		recorded = append(recorded, cause)
		return nil
	}
	// Both are read before the pipeline runs: a's retry wait passes the
	// minimum duration, and b must be there for the transaction to go on.
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.send("b", message.Flag_OUTSIDE_TXN)
	h.run()
	h.expect("consume a", "consume a", "consume b")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, cp = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{maxDur / 2}; !slices.Equal(*waits, want) {
		t.Errorf("waited %v, want %v (a second wait would end past the maximum duration)", *waits, want)
	}
	var he *runtime.HandlerError
	if len(recorded) != 1 || !errors.As(recorded[0], &he) || he.Method != "OnTest" || he.Attempts != 2 || he.Err != failed {
		t.Fatalf("recorded %v", recorded)
	}
	if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
		t.Errorf("checkpoint reads through %d, want 20", got)
	}
	if app.store.rows["a"] != "" || app.store.rows["b"] != "+" {
		t.Errorf("rows %v: the dead letter's writes must be undone", app.store.rows)
	}
	if s := <-h.stats; s.Messages != 2 || s.Retries != 1 || s.DeadLettered != 1 {
		t.Errorf("stats %+v", s)
	}
}

// A dead letter that can't be recorded fails the shard with the handler's
// error and why.
func TestHandlerDeadLetterWithoutSkip(t *testing.T) {
	var failed = errors.New("poison")
	var h, _, _ = newPolicyHarness(t, runtime.FailurePolicy{DeadLetter: true}, failed)
	h.pipeline.Skip = func(message.Envelope, error, *message.Publisher) error { return errors.New("no journal") }
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	if err := <-h.done; !errors.Is(err, failed) || !strings.Contains(err.Error(), "poison (and recording it as a dead letter failed: no journal)") {
		t.Errorf("Run = %v", err)
	}
}

// A fatal error is not the handler's: no policy applies to it.
func TestFatalErrorIsNotRetried(t *testing.T) {
	var h, _, waits = newPolicyHarness(t, runtime.FailurePolicy{Retries: 3, DeadLetter: true}, runtime.Fatal(errors.New("routed nowhere")))
	h.pipeline.Skip = func(message.Envelope, error, *message.Publisher) error {
		t.Error("a fatal error was recorded as a dead letter")
		return nil
	}
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	if err := <-h.done; err == nil || !strings.Contains(err.Error(), "routed nowhere") || len(*waits) != 0 {
		t.Errorf("Run = %v, waits %v", err, *waits)
	}
}

// A policy that retries needs a store that can undo a call's writes.
func TestFailurePolicyNeedsASavepointer(t *testing.T) {
	var h, app, _ = newPolicyHarness(t, runtime.FailurePolicy{Retries: 1})
	h.pipeline.Store = app.store.testStore
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	if err := <-h.done; err == nil || !strings.Contains(err.Error(), "not a runtime.Savepointer") {
		t.Errorf("Run = %v", err)
	}
}

// Delays double from the backoff, up to the maximum.
func TestFailurePolicyDelay(t *testing.T) {
	var p = runtime.FailurePolicy{Backoff: time.Second, MaxBackoff: 5 * time.Second}
	var got []time.Duration
	for n := range 5 {
		got = append(got, p.Delay(n))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("delays %v, want %v", got, want)
	}
	if d := (runtime.FailurePolicy{}).Delay(100); d != runtime.DefaultMaxBackoff {
		t.Errorf("default delay of retry 100 = %v", d)
	}
}
