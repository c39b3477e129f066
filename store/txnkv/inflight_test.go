package txnkv_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"go.gazette.dev/core/broker/client"
)

// inFlight is a commit of FuzzCommitsInFlight: its appends, which the
// fuzzer resolves, its future, and the state it commits.
type inFlight struct {
	appends *client.AsyncOperation
	op      client.OpFuture
	state   map[string]string
}

// FuzzCommitsInFlight runs a Store through fuzzed writes, commits started
// while up to one other is in flight (not yet applied: its appends
// pending, as a hurried transaction's predecessor), appends resolving in
// and out of order, failing or not, reads of the store and ReadStates:
// reads see the latest writes; ReadState sees the commits started; the
// Base ends with the last commit's state, or, once a commit failed, the
// later ones fail and the Base holds no write of theirs.
func FuzzCommitsInFlight(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 3, 2, 4, 5, 4, 6})
	f.Add([]byte{0, 2, 0, 2, 5, 4, 4, 1, 2, 7, 4})
	f.Add([]byte{0, 2, 0, 2, 8, 4, 4})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var b = &base{rows: map[string]string{}, durable: client.NewAsyncOperation()}
		b.durable.Resolve(nil)
		var s = txnkv.New("fuzz", b)
		defer s.Destroy()

		var cur = map[string]string{}     // The state as of the current transaction.
		var started = map[string]string{} // As of the last commit started.
		var flight []*inFlight            // Appends not yet resolved, oldest first.
		var all []*inFlight
		var failed = -1 // Index in all of the first commit that failed.
		var reads []chan error

		var await = func(c *inFlight) error {
			select {
			case <-c.op.Done():
				return c.op.Err()
			case <-time.After(10 * time.Second):
				t.Fatal("a commit did not resolve")
				return nil
			}
		}
		var resolve = func(i int, fail bool) {
			var c = flight[i]
			flight = slices.Delete(flight, i, i+1)
			if fail {
				c.appends.Resolve(errors.New("append failed"))
				if n := slices.Index(all, c); failed == -1 || n < failed {
					failed = n
				}
			} else {
				c.appends.Resolve(nil)
			}
		}
		for i, op := range ops {
			if failed != -1 {
				break // The store is broken: checked below.
			}
			var key = fmt.Sprintf("k%d", op>>4)
			switch op % 9 {
			case 0, 1: // Put.
				var v = fmt.Sprint(i)
				if err := s.Put([]byte(key), []byte(v)); err != nil {
					t.Fatal(err)
				}
				cur[key] = v
			case 2: // Delete.
				if err := s.Delete([]byte(key)); err != nil {
					t.Fatal(err)
				}
				delete(cur, key)
			case 3: // Get.
				var v, ok, err = s.Get([]byte(key))
				if want, wok := cur[key]; err != nil || ok != wok || string(v) != want {
					t.Fatalf("op %d: Get(%s) = %q %v %v, want %q %v", i, key, v, ok, err, want, wok)
				}
			case 4: // Start a commit, if no more than the last one started is in flight.
				if len(flight) > 1 || len(flight) == 1 && flight[0] != all[len(all)-1] {
					continue // StartCommit would wait for the first of two in flight.
				}
				var c = &inFlight{appends: client.NewAsyncOperation(), state: maps.Clone(cur)}
				c.op = s.StartCommit(nil, checkpointAt(int64(i+1)), client.OpFutures{c.appends: {}})
				flight, all, started = append(flight, c), append(all, c), c.state
			case 5, 6: // Resolve the oldest appends in flight.
				if len(flight) != 0 {
					resolve(0, false)
				}
			case 7: // Resolve the newest first.
				if len(flight) != 0 {
					resolve(len(flight)-1, false)
				}
			case 8: // Fail the oldest.
				if len(flight) != 0 {
					resolve(0, true)
				}
			}
			if op%9 == 4 || op%9 == 3 && i%2 == 0 {
				// ReadState sees what was started, whatever is durable.
				var seen = make(chan []string, 1)
				var done = make(chan error, 1)
				var want = scanOf(started)
				go func() {
					done <- s.ReadState(context.Background(), nil, func(r runtime.Reader) error {
						var rows []string
						var err = r.Scan([]byte("k"), []byte("l"), func(k, v []byte) bool { rows = append(rows, string(k)+"="+string(v)); return true })
						seen <- rows
						return err
					})
				}()
				var rows []string
				select {
				case rows = <-seen:
				case err := <-done:
					select {
					case rows = <-seen: // It read, and returned as soon.
						done <- err
					default:
						t.Fatalf("op %d: ReadState: %v", i, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("op %d: ReadState never read", i)
				}
				if !slices.Equal(rows, want) {
					t.Fatalf("op %d: ReadState read %v, want %v", i, rows, want)
				}
				reads = append(reads, done)
			}
		}
		// Resolve what is left, in order.
		for len(flight) != 0 {
			resolve(0, false)
		}
		for i, c := range all {
			var err = await(c)
			if failed == -1 || i < failed {
				if err != nil {
					t.Fatalf("commit %d of %d: %v", i+1, len(all), err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "append failed") {
				t.Fatalf("commit %d of %d, after commit %d failed: %v", i+1, len(all), failed+1, err)
			}
		}
		for _, done := range reads {
			if err := <-done; failed == -1 && err != nil {
				t.Fatalf("ReadState: %v", err)
			}
		}
		var want = started
		if failed == 0 {
			want = map[string]string{}
		} else if failed > 0 {
			want = all[failed-1].state
		}
		b.mu.Lock()
		var rows = maps.Clone(b.rows)
		b.mu.Unlock()
		delete(rows, txnkv.CheckpointKey)
		if !maps.Equal(rows, want) {
			t.Fatalf("the Base holds %v, want %v", rows, want)
		}
	})
}

// scanOf returns the rows of m as a scan of them reads them.
func scanOf(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
