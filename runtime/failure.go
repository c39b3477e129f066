package runtime

import (
	"errors"
	"time"

	"go.gazette.dev/core/message"
)

// Defaults of a FailurePolicy's backoff.
const (
	// DefaultBackoff is the wait before a first retry.
	DefaultBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff bounds the wait before any retry.
	DefaultMaxBackoff = 10 * time.Second
)

// FailurePolicy is what a shard does when a handler returns an error: the
// `on_failure` annotation of a consumer or of one of its rpcs. The zero
// FailurePolicy fails the shard at once.
//
// A handler is retried up to Retries times, waiting Backoff before the
// first retry and twice as long before each next one, up to MaxBackoff, as
// long as the wait ends within the transaction's maximum duration. Each
// retry starts from the transaction as it was before the failed call: the
// failed call's writes to the shard's store are undone (the store is a
// Savepointer) and the messages it published are dropped (a transaction
// holds them until its handler returns). Once the retries are spent, the
// shard fails, or, if DeadLetter, the message, its error, journal and offset
// are recorded into the shard's dead-letter journal within the transaction
// (see runtime/source) and the shard goes on: exactly once either way.
type FailurePolicy struct {
	// Retries is the most times a failed call is retried.
	Retries int
	// Backoff is the wait before the first retry; zero means DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff bounds the wait before each retry; zero means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// DeadLetter records a message whose handler still fails into the
	// dead-letter journal, rather than failing the shard.
	DeadLetter bool
}

// Fails reports whether p fails the shard at the first error, as the zero
// FailurePolicy does: a call under it needs no savepoint.
func (p FailurePolicy) Fails() bool { return p.Retries == 0 && !p.DeadLetter }

// Delay returns the wait before retry n (0 for the first).
func (p FailurePolicy) Delay(n int) time.Duration {
	var d, most = p.Backoff, p.MaxBackoff
	if d <= 0 {
		d = DefaultBackoff
	}
	if most <= 0 {
		most = DefaultMaxBackoff
	}
	for ; n > 0 && d < most; n-- {
		d *= 2
	}
	return min(d, most)
}

// FailurePolicer is implemented by an Application whose handlers have
// failure policies (as Adapter is): a transaction pipeline applies the
// policy of the handler of each message it consumes. An Application which
// is not a FailurePolicer has every handler fail the shard.
type FailurePolicer interface {
	// FailurePolicy returns the policy of the handler of msg.
	FailurePolicy(msg message.Message) FailurePolicy
}

// Savepointer is implemented by a Store whose current transaction can undo
// the writes of one handler call (the stores of store/txnkv, store/rocks
// and store/mem do): a failure policy that retries or records dead letters
// needs it.
type Savepointer interface {
	// Savepoint marks where the transaction's writes are, in place of any
	// earlier savepoint.
	Savepoint()
	// RollbackToSavepoint undoes the writes made since the savepoint,
	// which stays set.
	RollbackToSavepoint()
	// ReleaseSavepoint ends the savepoint, keeping the writes.
	ReleaseSavepoint()
}

// HandlerError is the error of a handler that failed under its failure
// policy: the last of its attempts. A pipeline records it into the shard's
// dead-letter journal when the policy says so.
type HandlerError struct {
	// Method is the name of the rpc whose handler failed.
	Method string
	// Attempts is how many times the handler was called.
	Attempts int
	// Err is the handler's error.
	Err error
}

// Error returns Err's text.
func (e *HandlerError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *HandlerError) Unwrap() error { return e.Err }

// MethodError is the error of an Application's ConsumeMessage whose
// handler, the rpc Method, failed: a pipeline names the method in the
// records of dead letters.
type MethodError struct {
	// Method is the name of the rpc whose handler failed.
	Method string
	// Err is the handler's error.
	Err error
}

// Error returns the text of Err.
func (e *MethodError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *MethodError) Unwrap() error { return e.Err }

// fatal is an error that no failure policy applies to.
type fatal struct{ error }

// Unwrap returns the error marked.
func (f fatal) Unwrap() error { return f.error }

// Fatal marks err, an error of an Application's ConsumeMessage, as one that
// no failure policy applies to: it is not the handler's, and fails the
// shard at once (a message routed to no handler, a journal read under a
// partitioning other than the store's, a publication that failed).
func Fatal(err error) error { return fatal{err} }

// IsFatal reports whether err was marked by Fatal.
func IsFatal(err error) bool {
	var f fatal
	return errors.As(err, &f)
}
