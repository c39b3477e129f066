package rocks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"go.gazette.dev/core/broker/client"
)

// gatedRecorder records nothing, and its barriers resolve as the test says:
// a write is in the database but not in the (imagined) recovery log until
// then.
type gatedRecorder struct {
	nopRecorder
	mu    sync.Mutex
	gate  *client.AsyncOperation // Returned by Barrier; nil resolves at once.
	fails error                  // Resolves the gate with it.
}

func (r *gatedRecorder) Barrier(client.OpFutures) client.OpFuture {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gate == nil {
		return client.FinishedOperation(nil)
	}
	return r.gate
}

func committedValue(s *Store, key string, wait time.Duration) (string, error) {
	var ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out = "<absent>"
	var err = s.ReadCommitted(ctx, func(r runtime.Reader) error {
		var v, ok, err = r.Get([]byte(key))
		if ok {
			out = string(v)
		}
		return err
	})
	return out, err
}

// A committed read of the store sees neither the open transaction nor a
// commit that RocksDB holds but the recovery log does not yet: it waits for
// the log, and fails if the log's write does.
func TestReadCommittedWaitsForTheRecoveryLog(t *testing.T) {
	var rec = new(gatedRecorder)
	var s, err = Open(t.TempDir(), rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	_ = s.Put([]byte("a"), []byte("1"))
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	_ = s.Put([]byte("a"), []byte("2")) // Open.
	if v, err := committedValue(s, "a", time.Second); v != "1" || err != nil {
		t.Fatalf("with a transaction open: %s, %v", v, err)
	}

	rec.mu.Lock()
	rec.gate = client.NewAsyncOperation()
	rec.mu.Unlock()
	var op = s.StartCommit(nil, checkpointAt(2), nil)
	for { // Until RocksDB holds it.
		var v, err = s.DB().GetBytes(s.ro, []byte("a"))
		if err != nil {
			t.Fatal(err)
		} else if string(v) == "2" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if v, err := committedValue(s, "a", 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with the commit in RocksDB but not in the log: %s, %v; want it to wait", v, err)
	}
	rec.gate.Resolve(nil)
	await(t, op)
	if v, err := committedValue(s, "a", time.Second); v != "2" || err != nil {
		t.Fatalf("once logged: %s, %v", v, err)
	}

	rec.mu.Lock()
	rec.gate = client.NewAsyncOperation()
	rec.mu.Unlock()
	_ = s.Put([]byte("a"), []byte("3"))
	op = s.StartCommit(nil, checkpointAt(3), nil)
	rec.gate.Resolve(errors.New("log append failed"))
	<-op.Done()
	if v, err := committedValue(s, "a", time.Second); err == nil || !strings.Contains(err.Error(), "log append failed") {
		t.Fatalf("after the log failed: %s, %v", v, err)
	}
}

// Committed reads and scans on other goroutines, while transactions commit
// and the store's goroutine reads, see one commit each, in order; the store
// destroyed under them fails them cleanly (run with -race).
func TestReadCommittedConcurrently(t *testing.T) {
	var s, err = Open(t.TempDir(), new(gatedRecorder), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const keys, txns = 50, 200
	var stop = make(chan struct{})
	var readers sync.WaitGroup
	var errs = make(chan error, 8)
	for range 3 {
		readers.Go(func() {
			var last = -1
			for {
				select {
				case <-stop:
					return
				default:
				}
				var seen = map[string]int{}
				var err = s.ReadCommitted(context.Background(), func(r runtime.Reader) error {
					if _, _, err := r.Get([]byte("k00")); err != nil {
						return err
					}
					return r.Scan([]byte("k"), []byte("l"), func(k, v []byte) bool {
						var n int
						fmt.Sscan(string(v), &n)
						seen[string(k)] = n
						return true
					})
				})
				if err != nil {
					errs <- err
					return
				}
				var n = -1
				for k, v := range seen {
					if n != -1 && v != n {
						errs <- fmt.Errorf("a scan saw %s=%d beside %d: two commits", k, v, n)
						return
					}
					n = v
				}
				if n < last {
					errs <- fmt.Errorf("a scan saw commit %d after %d", n, last)
					return
				}
				last = n
			}
		})
	}
	for i := range txns {
		for k := range keys {
			_ = s.Put(fmt.Appendf(nil, "k%02d", k), fmt.Appendf(nil, "%d", i))
			if _, _, err := s.Get(fmt.Appendf(nil, "k%02d", (k+7)%keys)); err != nil {
				t.Fatal(err)
			}
		}
		await(t, s.StartCommit(nil, checkpointAt(int64(i)), nil))
	}
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Destroyed while read: reads end, and later ones fail.
	var reading = make(chan error, 1)
	go func() {
		for {
			if err := s.ReadCommitted(context.Background(), func(runtime.Reader) error { return nil }); err != nil {
				reading <- err
				return
			}
		}
	}()
	time.Sleep(10 * time.Millisecond)
	s.Destroy()
	if err := <-reading; !strings.Contains(err.Error(), "store closed") {
		t.Fatalf("read of a destroyed store: %v", err)
	}
}
