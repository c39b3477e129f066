package txn

import (
	"context"
	"errors"
	"sync"

	pb "go.gazette.dev/core/broker/protocol"
)

// Queue carries reads from a shard's readers, one goroutine per source
// journal, to its Pipeline. Readers Put reads one at a time; the pipeline
// takes every queued read at once, which spares it a channel operation (and
// often a hand-off between goroutines) per message. Reads of one reader are
// taken in the order it put them.
type Queue struct {
	mu     sync.Mutex
	reads  []Read
	limit  int
	closed bool
	// ready holds a token while reads may be taken: Put leaves one when
	// it makes the queue non-empty. Close closes it.
	ready chan struct{}
	// space, when non-nil, is closed when Take empties a full queue; Puts
	// waiting on a full queue wait on it.
	space chan struct{}
	// lags holds, by journal, the Lag of its last read put, if not zero.
	lags map[pb.Journal]int64
}

// ErrQueueClosed is returned by Put on a closed Queue.
var ErrQueueClosed = errors.New("txn: put on a closed read queue")

// NewQueue returns a Queue that holds up to limit reads before Put waits.
func NewQueue(limit int) *Queue {
	return &Queue{limit: max(limit, 1), ready: make(chan struct{}, 1), lags: make(map[pb.Journal]int64)}
}

// Put queues r, waiting while the queue is full. It returns ctx's error if
// ctx is done first, and ErrQueueClosed if the queue is closed.
func (q *Queue) Put(ctx context.Context, r Read) error {
	q.mu.Lock()
	for len(q.reads) >= q.limit && !q.closed {
		if q.space == nil {
			q.space = make(chan struct{})
		}
		var space = q.space
		q.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		}
		q.mu.Lock()
	}
	if q.closed {
		q.mu.Unlock()
		return ErrQueueClosed
	}
	q.reads = append(q.reads, r)
	if r.Env.Journal != nil {
		if r.Lag > 0 {
			q.lags[r.Env.Journal.Name] = r.Lag
		} else {
			delete(q.lags, r.Env.Journal.Name)
		}
	}
	if len(q.reads) == 1 {
		select {
		case q.ready <- struct{}{}:
		default: // A token is already waiting.
		}
	}
	q.mu.Unlock()
	return nil
}

// Close ends the queue: once the reads queued are taken, Take reports it
// closed. Puts waiting on a full queue return ErrQueueClosed.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	close(q.ready)
	if q.space != nil {
		close(q.space)
		q.space = nil
	}
}

// Lag returns the sum, over the journals read, of the Lag of each one's
// last read put: how many bytes its readers have yet to deliver without
// waiting on the journals' writers, beyond the reads put. It is zero once
// every reader has read at its journal's write head.
func (q *Queue) Lag() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var sum int64
	for _, lag := range q.lags {
		sum += lag
	}
	return sum
}

// Ready returns a channel which receives when reads may be taken, and
// always once the queue is closed. A receive may find nothing to take: a
// token can outlive the reads that left it.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Take returns every queued read, and whether the queue is closed with
// nothing left to take. It keeps buf, whose reads the caller is done with,
// to queue further reads into: buf is nil, or reads as an earlier Take
// returned them (reads are appended from its start, so only its first
// len(buf) entries were ever written).
func (q *Queue) Take(buf []Read) (reads []Read, closed bool) {
	clear(buf) // Release the messages it refers to.
	q.mu.Lock()
	defer q.mu.Unlock()
	reads, q.reads = q.reads, buf[:0]
	if q.space != nil && len(reads) != 0 {
		close(q.space)
		q.space = nil
	}
	return reads, q.closed && len(reads) == 0
}
