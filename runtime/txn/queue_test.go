package txn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// Reads of several readers all arrive, each reader's in order, in batches
// no larger than the queue's limit; Close ends taking once they're taken.
func TestQueueCarriesEveryReadInOrder(t *testing.T) {
	const readers, each, limit = 3, 2000, 16
	var q = NewQueue(limit)
	var wg sync.WaitGroup
	for i := range readers {
		var spec = &pb.JournalSpec{Name: pb.Journal("reader/" + string(rune('a'+i)))}
		wg.Go(func() {
			for n := range each {
				if err := q.Put(context.Background(), Read{Env: message.Envelope{Journal: spec, Begin: pb.Offset(n)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); q.Close() }()

	var next = make(map[pb.Journal]pb.Offset)
	var buf []Read
	var batches int
	for {
		<-q.Ready()
		var closed bool
		if buf, closed = q.Take(buf); closed {
			break
		}
		if len(buf) > limit {
			t.Fatalf("took %d reads from a queue of %d", len(buf), limit)
		}
		if len(buf) != 0 {
			batches++
		}
		for _, r := range buf {
			if r.Env.Begin != next[r.Env.Journal.Name] {
				t.Fatalf("%s: read %d, want %d", r.Env.Journal.Name, r.Env.Begin, next[r.Env.Journal.Name])
			}
			next[r.Env.Journal.Name]++
		}
	}
	for j, n := range next {
		if n != each {
			t.Fatalf("%s: %d reads, want %d", j, n, each)
		}
	}
	if len(next) != readers {
		t.Fatalf("reads of %d readers, want %d", len(next), readers)
	}
	t.Logf("%d reads in %d batches", readers*each, batches)
	// Closed stays closed, and ready.
	for range 2 {
		select {
		case <-q.Ready():
		default:
			t.Fatal("a closed queue is not ready")
		}
		if _, closed := q.Take(nil); !closed {
			t.Fatal("a closed, drained queue is not reported closed")
		}
	}
	if err := q.Put(context.Background(), Read{}); !errors.Is(err, ErrQueueClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
}

// A Put waiting on a full queue returns when its context is cancelled, or
// when the queue closes.
func TestQueuePutWaitsWhileFull(t *testing.T) {
	var q = NewQueue(1)
	if err := q.Put(context.Background(), Read{}); err != nil {
		t.Fatal(err)
	}
	var ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := q.Put(ctx, Read{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put on a full queue: %v, want its context's deadline", err)
	}

	var done = make(chan error, 2)
	for range 2 {
		go func() { done <- q.Put(context.Background(), Read{}) }()
	}
	time.Sleep(10 * time.Millisecond)
	if reads, _ := q.Take(nil); len(reads) != 1 {
		t.Fatalf("took %d reads, want 1", len(reads))
	}
	// One waiting Put fits now; the other waits again until Close.
	var first = <-done
	q.Close()
	var second = <-done
	if first != nil || !errors.Is(second, ErrQueueClosed) {
		t.Fatalf("waiting Puts returned %v and %v; want nil and ErrQueueClosed", first, second)
	}
	if reads, closed := q.Take(nil); len(reads) != 1 || closed {
		t.Fatalf("after Close: took %d reads (closed %v), want the one queued", len(reads), closed)
	}
}

// Lag sums the lags of the journals' last reads put, whether or not the
// reads were taken.
func TestQueueLag(t *testing.T) {
	var q = NewQueue(10)
	var a, b = &pb.JournalSpec{Name: "a"}, &pb.JournalSpec{Name: "b"}
	var put = func(j *pb.JournalSpec, lag int64) {
		if err := q.Put(context.Background(), Read{Env: message.Envelope{Journal: j}, Lag: lag}); err != nil {
			t.Fatal(err)
		}
	}
	var expect = func(want int64) {
		t.Helper()
		if got := q.Lag(); got != want {
			t.Fatalf("lag %d, want %d", got, want)
		}
	}
	expect(0) // An empty queue.
	put(a, 100)
	put(b, 0)
	q.Take(nil)
	expect(100) // a's last read.
	put(b, 30)
	expect(130)
	put(a, 0)
	expect(30)
	put(b, 0)
	expect(0)
	// A read error (of no journal) changes nothing.
	put(a, 7)
	if err := q.Put(context.Background(), Read{Err: errors.New("x")}); err != nil {
		t.Fatal(err)
	}
	expect(7)
}
