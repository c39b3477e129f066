package txnkv_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"go.gazette.dev/core/broker/client"
)

// readCommitted returns the value of key that ReadCommitted sees, or its
// error, waiting at most wait.
func readCommitted(s *txnkv.Store, key string, wait time.Duration) (string, error) {
	var ctx, cancel = context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out string
	var err = s.ReadCommitted(ctx, func(r runtime.Reader) error {
		var v, ok, err = r.Get([]byte(key))
		if err != nil {
			return err
		} else if !ok {
			out = "<absent>"
		} else {
			out = string(v)
		}
		return nil
	})
	return out, err
}

// ReadCommitted sees neither the open transaction's writes nor those of a
// commit the Base holds but not yet durably; it waits for that commit to be
// durable and then sees it; a commit that fails to be durable fails every
// later read; Destroy fails a read waiting for a commit.
func TestReadCommittedSeesOnlyDurableCommits(t *testing.T) {
	var b = &base{rows: map[string]string{"a": "0"}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	defer s.Destroy()

	_ = s.Put([]byte("a"), []byte("open"))
	if v, err := readCommitted(s, "a", time.Second); v != "0" || err != nil {
		t.Fatalf("with a transaction open: %q, %v; want the Base's 0", v, err)
	}

	var op = s.StartCommit(nil, checkpointAt(1), nil)
	// Once the Base holds the write, it is still not durable: a committed
	// read waits.
	waitWritten(t, s)
	if v, err := readCommitted(s, "a", 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with a commit written but not durable: %q, %v; want it to wait", v, err)
	}
	var got = make(chan string, 1)
	go func() {
		var v, err = readCommitted(s, "a", 10*time.Second)
		got <- fmt.Sprint(v, err)
	}()
	time.Sleep(20 * time.Millisecond)
	b.durable.Resolve(nil)
	if v := <-got; v != "open<nil>" {
		t.Fatalf("once durable: %s", v)
	}
	<-op.Done()

	// A commit that fails to be durable fails reads, then and later.
	b.durable = client.NewAsyncOperation()
	_ = s.Put([]byte("a"), []byte("lost"))
	op = s.StartCommit(nil, checkpointAt(2), nil)
	waitWritten(t, s)
	b.durable.Resolve(errors.New("log append failed"))
	<-op.Done()
	for range 2 {
		if v, err := readCommitted(s, "a", time.Second); err == nil || !strings.Contains(err.Error(), "log append failed") {
			t.Fatalf("after a failed commit: %q, %v", v, err)
		}
	}
}

// A read waiting for a commit to be durable fails once the store closes,
// and reads after Destroy fail with ErrClosed.
func TestReadCommittedFailsOnClose(t *testing.T) {
	var b = &base{rows: map[string]string{}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	_ = s.Put([]byte("a"), []byte("1"))
	s.StartCommit(nil, checkpointAt(1), nil)
	waitWritten(t, s)
	var got = make(chan error, 1)
	go func() {
		var _, err = readCommitted(s, "a", 10*time.Second)
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	s.Destroy()
	if err := <-got; !errors.Is(err, txnkv.ErrClosed) {
		t.Fatalf("read waiting as the store closed: %v", err)
	}
	if _, err := readCommitted(s, "a", time.Second); !errors.Is(err, txnkv.ErrClosed) {
		t.Fatalf("read after Destroy: %v", err)
	}
}

// Reserved keys are not readable, nor scanned.
func TestReadCommittedHidesReservedKeys(t *testing.T) {
	var b = &base{rows: map[string]string{"a": "1"}, durable: client.NewAsyncOperation()}
	b.durable.Resolve(nil)
	var s = txnkv.New("test", b)
	defer s.Destroy()
	_ = s.Put([]byte("b"), []byte("2"))
	<-s.StartCommit(nil, checkpointAt(1), nil).Done()
	var keys []string
	var err = s.ReadCommitted(context.Background(), func(r runtime.Reader) error {
		if _, _, err := r.Get([]byte(txnkv.CheckpointKey)); err == nil {
			return errors.New("the checkpoint key is readable")
		}
		return r.Scan(nil, nil, func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
	})
	if err != nil || strings.Join(keys, ",") != "a,b" {
		t.Fatalf("scan: %q, %v", keys, err)
	}
}

// waitWritten waits until the store has handed its commit to the Base.
func waitWritten(t *testing.T, s *txnkv.Store) {
	t.Helper()
	var deadline = time.Now().Add(10 * time.Second)
	for !txnkv.Written(s) {
		if time.Now().After(deadline) {
			t.Fatal("the commit was never written")
		}
		time.Sleep(time.Millisecond)
	}
}

// sharedBase is a Base whose every write makes a transaction's keys hold
// its number, durable at once, for concurrent readers.
type sharedBase struct {
	mu   sync.RWMutex // Checks that reads of Shared never overlap Write.
	rows map[string]string
}

func (b *sharedBase) Get(key []byte) ([]byte, bool, error) {
	var v, ok = b.rows[string(key)]
	return []byte(v), ok, nil
}
func (b *sharedBase) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return (&base{rows: b.rows}).Scan(start, end, fn)
}
func (b *sharedBase) Checkpoint() ([]byte, error) { return nil, nil }
func (b *sharedBase) Write(w *txnkv.Overlay, _ []byte) (client.OpFuture, error) {
	if !b.mu.TryLock() {
		return nil, errors.New("a shared read overlaps Write")
	}
	defer b.mu.Unlock()
	w.Ascend(nil, nil, func(e txnkv.Entry) bool {
		b.rows[string(e.Key)] = string(e.Value)
		return true
	})
	// Durable a little later, on another goroutine.
	var op = client.NewAsyncOperation()
	time.AfterFunc(50*time.Microsecond, func() { op.Resolve(nil) })
	return op, nil
}
func (b *sharedBase) Settled(*txnkv.Overlay) {}
func (b *sharedBase) Shared() runtime.Reader { return sharedReader{b} }

type sharedReader struct{ b *sharedBase }

func (r sharedReader) Get(key []byte) ([]byte, bool, error) {
	if !r.b.mu.TryRLock() {
		return nil, false, errors.New("a shared read overlaps Write")
	}
	defer r.b.mu.RUnlock()
	return r.b.Get(key)
}
func (r sharedReader) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if !r.b.mu.TryRLock() {
		return errors.New("a shared read overlaps Write")
	}
	defer r.b.mu.RUnlock()
	return r.b.Scan(start, end, fn)
}

// Readers on other goroutines, while transactions commit back to back, each
// see the keys of one commit (never a mix of two), in the order committed,
// and never one whose future is still to come: no commit of the Base
// overlaps their reads (run with -race).
func TestReadCommittedConcurrentWithCommits(t *testing.T) {
	var b = &sharedBase{rows: map[string]string{"x": "0000", "y": "0000"}}
	var s = txnkv.New("test", b)
	defer s.Destroy()

	const txns = 300
	var durable sync.Mutex
	var lastDurable = "0000" // Of the last commit whose future resolved.
	var stop = make(chan struct{})
	var readers sync.WaitGroup
	var errs = make(chan error, 4)
	for range 3 {
		readers.Go(func() {
			var last = "0000"
			for {
				select {
				case <-stop:
					return
				default:
				}
				durable.Lock()
				var floor = lastDurable
				durable.Unlock()
				var x, y string
				var err = s.ReadCommitted(context.Background(), func(r runtime.Reader) error {
					return r.Scan(nil, nil, func(k, v []byte) bool {
						if string(k) == "x" {
							x = string(v)
						} else if string(k) == "y" {
							y = string(v)
						}
						return true
					})
				})
				switch {
				case err != nil:
					errs <- err
				case x != y:
					errs <- fmt.Errorf("a read saw x=%s, y=%s: two commits", x, y)
				case x < last:
					errs <- fmt.Errorf("a read saw %s after %s", x, last)
				case x < floor:
					errs <- fmt.Errorf("a read saw %s after the commit of %s resolved", x, floor)
				default:
					last = x
					continue
				}
				return
			}
		})
	}
	var prev client.OpFuture
	for i := 1; i <= txns; i++ {
		var n = fmt.Sprintf("%04d", i)
		_ = s.Put([]byte("x"), []byte(n))
		_ = s.Put([]byte("y"), []byte(n))
		if prev != nil {
			<-prev.Done() // As the pipeline does: a commit starts once the last resolved.
			if err := prev.Err(); err != nil {
				t.Fatal(err)
			}
			durable.Lock()
			lastDurable = fmt.Sprintf("%04d", i-1)
			durable.Unlock()
		}
		prev = s.StartCommit(nil, checkpointAt(int64(i)), nil)
	}
	<-prev.Done()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v, err := readCommitted(s, "x", time.Second); v != fmt.Sprintf("%04d", txns) || err != nil {
		t.Fatalf("last read: %q, %v", v, err)
	}
}

// With a commit written but not durable, a Get of a key it did not write,
// and a Scan of a range in which it wrote nothing, answer at once, from the
// Base; a Scan of a range in which it wrote waits.
func TestReadCommittedWaitsOnlyForWhatItReads(t *testing.T) {
	var b = &base{rows: map[string]string{"a": "0", "z": "0"}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	defer s.Destroy()
	_ = s.Put([]byte("a"), []byte("1"))
	var op = s.StartCommit(nil, checkpointAt(1), nil)
	waitWritten(t, s)
	if v, err := readCommitted(s, "z", time.Second); v != "0" || err != nil {
		t.Fatalf("a key the commit did not write: %q, %v", v, err)
	}
	var scan = func(start, end string) (rows []string, err error) {
		var ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var endKey []byte
		if end != "" {
			endKey = []byte(end)
		}
		err = s.ReadCommitted(ctx, func(r runtime.Reader) error {
			rows = nil
			return r.Scan([]byte(start), endKey, func(k, v []byte) bool { rows = append(rows, string(k)+"="+string(v)); return true })
		})
		return rows, err
	}
	if rows, err := scan("b", ""); err != nil || !slices.Equal(rows, []string{"z=0"}) {
		t.Fatalf("a scan of a range the commit in flight did not write: %q, %v", rows, err)
	}
	for _, r := range [][2]string{{"", ""}, {"a", "b"}, {"", "z"}} {
		if _, err := scan(r[0], r[1]); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a scan of [%q, %q), in which the commit in flight wrote: %v; want it to wait", r[0], r[1], err)
		}
	}
	b.durable.Resolve(nil)
	<-op.Done()
}

// ReadState reads the whole state, reserved keys too, with the writes of
// commits not yet durable, and returns once the commit which wrote its
// settled key is durable (only that one); a failed commit fails it.
func TestReadStateWaitsOnlyForItsSettledKey(t *testing.T) {
	var settled = []byte("\x01split")
	var b = &base{rows: map[string]string{"a": "0"}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	defer s.Destroy()
	var read = func(wait time.Duration) (string, error) {
		var ctx, cancel = context.WithTimeout(context.Background(), wait)
		defer cancel()
		var rows []string
		var err = s.ReadState(ctx, settled, func(r runtime.Reader) error {
			rows = nil
			return r.Scan(nil, nil, func(k, v []byte) bool { rows = append(rows, fmt.Sprintf("%q=%s", k, v)); return true })
		})
		return strings.Join(rows, ","), err
	}

	_ = s.Put(settled, []byte("1"))
	_ = s.Put([]byte("a"), []byte("1"))
	var op = s.StartCommit(nil, checkpointAt(1), nil)
	waitWritten(t, s)
	var want = fmt.Sprintf("%q=1,%q=1", settled, "a")
	if rows, err := read(50 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(rows, want) {
		t.Fatalf("with the commit of the settled key not durable: %s, %v; want it read (%s), and then to wait", rows, err, want)
	}
	var waited = make(chan error, 1)
	go func() { _, err := read(5 * time.Second); waited <- err }()
	select {
	case err := <-waited:
		t.Fatalf("returned before the commit of the settled key was durable: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.durable.Resolve(nil)
	if err := <-waited; err != nil {
		t.Fatalf("once the commit of the settled key is durable: %v", err)
	}
	<-op.Done()
	if rows, err := read(time.Second); err != nil || !strings.Contains(rows, want) {
		t.Fatalf("once durable: %s, %v; want %s among them", rows, err, want)
	}

	// A later commit, not durable, is seen at once.
	b.durable = client.NewAsyncOperation()
	_ = s.Put([]byte("a"), []byte("2"))
	op = s.StartCommit(nil, checkpointAt(2), nil)
	waitWritten(t, s)
	want = fmt.Sprintf("%q=1,%q=2", settled, "a")
	if rows, err := read(time.Second); err != nil || !strings.Contains(rows, want) {
		t.Fatalf("with a later commit not durable: %s, %v; want %s among them", rows, err, want)
	}
	b.durable.Resolve(nil)
	<-op.Done()

	// Its reads don't hold off commits.
	b.durable = client.NewAsyncOperation()
	if err := s.ReadState(context.Background(), settled, func(r runtime.Reader) error {
		_ = s.Put([]byte("b"), []byte("during"))
		op = s.StartCommit(nil, checkpointAt(3), nil)
		for deadline := time.Now().Add(5 * time.Second); !txnkv.Written(s); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("a commit begun during ReadState's read was not written")
			}
		}
		var v, _, err = r.Get([]byte("b"))
		if string(v) != "during" {
			return fmt.Errorf("the read does not see the commit written as it ran: %q, %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.durable.Resolve(errors.New("log append failed"))
	<-op.Done()
	if rows, err := read(time.Second); err == nil || !strings.Contains(err.Error(), "log append failed") {
		t.Fatalf("after a failed commit: %s, %v", rows, err)
	}
}

// A ReadState which read the settled key of a commit not yet durable fails
// if that commit fails, as the commit is handed to the Base during its read
// too.
func TestReadStateFailsWithTheSettledCommit(t *testing.T) {
	var settled = []byte("\x01split")
	for _, during := range []bool{false, true} {
		var b = &base{rows: map[string]string{}, durable: client.NewAsyncOperation()}
		var s = txnkv.New("test", b)
		var op client.OpFuture
		var commit = func() {
			_ = s.Put(settled, []byte("1"))
			op = s.StartCommit(nil, checkpointAt(1), nil)
			waitWritten(t, s)
		}
		if !during {
			commit()
		}
		var done = make(chan error, 1)
		go func() {
			done <- s.ReadState(context.Background(), settled, func(r runtime.Reader) error {
				if during {
					commit()
				}
				if _, found, err := r.Get(settled); err != nil || !found {
					return fmt.Errorf("the settled key is not read: %v, %v", found, err)
				}
				return nil
			})
		}()
		select {
		case err := <-done:
			t.Fatalf("during=%v: returned before the commit of the settled key resolved: %v", during, err)
		case <-time.After(50 * time.Millisecond):
		}
		b.durable.Resolve(errors.New("log append failed"))
		if err := <-done; err == nil || !strings.Contains(err.Error(), "log append failed") {
			t.Fatalf("during=%v: after the settled commit failed: %v", during, err)
		}
		<-op.Done()
		s.Destroy()
	}
}

// A commit is read by ReadState from the moment it starts, while it waits
// for its transaction's appends, and ReadState then waits for it to be
// durable, failing if its appends fail.
func TestReadStateReadsAStartedCommit(t *testing.T) {
	var settled = []byte("\x01split")
	for _, fail := range []bool{false, true} {
		var b = &base{rows: map[string]string{"a": "0", "b": "0", "c": "0"}, durable: client.NewAsyncOperation()}
		var s = txnkv.New("test", b)
		_ = s.Put(settled, []byte("1"))
		_ = s.Put([]byte("a"), []byte("1"))
		_ = s.Delete([]byte("b"))
		_ = s.Put([]byte("d"), []byte("1"))
		var appends = client.NewAsyncOperation()
		var op = s.StartCommit(nil, checkpointAt(1), client.OpFutures{appends: {}})

		var done = make(chan error, 1)
		var read = make(chan string, 1)
		go func() {
			done <- s.ReadState(context.Background(), settled, func(r runtime.Reader) error {
				var rows []string
				if err := r.Scan([]byte("a"), nil, func(k, v []byte) bool { rows = append(rows, fmt.Sprintf("%s=%s", k, v)); return true }); err != nil {
					return err
				}
				if v, found, err := r.Get(settled); err != nil || !found || string(v) != "1" {
					return fmt.Errorf("the settled key: %q, %v, %v", v, found, err)
				}
				if _, found, err := r.Get([]byte("b")); err != nil || found {
					return fmt.Errorf("the deleted key: %v, %v", found, err)
				}
				read <- strings.Join(rows, ",")
				return nil
			})
		}()
		if rows := <-read; rows != "a=1,c=0,d=1" {
			t.Fatalf("fail=%v: read %s of a commit waiting for its appends; want a=1,c=0,d=1", fail, rows)
		}
		select {
		case err := <-done:
			t.Fatalf("fail=%v: returned before the started commit was durable: %v", fail, err)
		case <-time.After(30 * time.Millisecond):
		}
		if fail {
			appends.Resolve(errors.New("append failed"))
			if err := <-done; err == nil || !strings.Contains(err.Error(), "append failed") {
				t.Fatalf("after the commit's appends failed: %v", err)
			}
		} else {
			appends.Resolve(nil)
			select {
			case err := <-done:
				t.Fatalf("returned before the written commit was durable: %v", err)
			case <-time.After(30 * time.Millisecond):
			}
			b.durable.Resolve(nil)
			if err := <-done; err != nil {
				t.Fatalf("once the commit is durable: %v", err)
			}
		}
		<-op.Done()
		s.Destroy()
	}
}

// ReadState waits for the started commit which wrote its settled key, but
// not for one started after it: the fork it reads for relies on none of
// its rows.
func TestReadStateWaitsNotForLaterStartedCommits(t *testing.T) {
	var settled = []byte("\x01split")
	var b = &base{rows: map[string]string{}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	defer s.Destroy()
	var appends = []*client.AsyncOperation{client.NewAsyncOperation(), client.NewAsyncOperation()}
	var ops []client.OpFuture
	for i, key := range []string{string(settled), "b"} {
		_ = s.Put([]byte(key), []byte("1"))
		ops = append(ops, s.StartCommit(nil, checkpointAt(int64(i+1)), client.OpFutures{appends[i]: {}}))
	}
	var done = make(chan error, 1)
	go func() {
		done <- s.ReadState(context.Background(), settled, func(r runtime.Reader) error {
			if _, found, err := r.Get(settled); err != nil || !found {
				return fmt.Errorf("the settled key is not read: %v, %v", found, err)
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("returned with the commit of the settled key not written: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	appends[0].Resolve(nil)
	b.durable.Resolve(nil) // The first is written and durable; the second waits for its appends.
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadState waits for a commit started after the one which wrote its settled key")
	}
	appends[1].Resolve(nil)
	for _, op := range ops {
		if err := op.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// ReadWritten returns once the commit which wrote its settled key is
// written to the Base, before it's durable, and its durable then waits for
// that commit to be durable, failing if it fails; a commit which fails to
// be written fails ReadWritten itself.
func TestReadWrittenReturnsBeforeTheSettledCommitIsDurable(t *testing.T) {
	var settled = []byte("\x01split")
	for _, outcome := range []string{"durable", "not durable", "not written"} {
		var b = &base{rows: map[string]string{}, durable: client.NewAsyncOperation()}
		var s = txnkv.New("test", b)
		var appends = client.NewAsyncOperation()
		_ = s.Put(settled, []byte("1"))
		var op = s.StartCommit(nil, checkpointAt(1), client.OpFutures{appends: {}})

		type result struct {
			durable func(context.Context) error
			err     error
		}
		var done = make(chan result, 1)
		go func() {
			var d, err = s.ReadWritten(context.Background(), settled, func(r runtime.Reader) error {
				if _, found, err := r.Get(settled); err != nil || !found {
					return fmt.Errorf("the settled key is not read: %v, %v", found, err)
				}
				return nil
			})
			done <- result{d, err}
		}()
		select {
		case r := <-done:
			t.Fatalf("%s: returned before the settled commit was written: %v", outcome, r.err)
		case <-time.After(30 * time.Millisecond):
		}
		if outcome == "not written" {
			appends.Resolve(errors.New("append failed"))
			if r := <-done; r.err == nil || !strings.Contains(r.err.Error(), "append failed") || r.durable != nil {
				t.Fatalf("%s: after the transaction's appends failed: %v", outcome, r.err)
			}
			<-op.Done()
			s.Destroy()
			continue
		}
		appends.Resolve(nil)
		var r result
		select {
		case r = <-done:
			if r.err != nil {
				t.Fatalf("%s: %v", outcome, r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadWritten waits for more than the write of the settled commit", outcome)
		}
		var durable = make(chan error, 1)
		go func() { durable <- r.durable(context.Background()) }()
		select {
		case err := <-durable:
			t.Fatalf("%s: durable returned %v with the settled commit not durable; want it to wait", outcome, err)
		case <-time.After(30 * time.Millisecond):
		}
		if outcome == "durable" {
			b.durable.Resolve(nil)
		} else {
			b.durable.Resolve(errors.New("log append failed"))
		}
		var err = <-durable
		if outcome == "durable" && err != nil {
			t.Fatalf("%s: %v", outcome, err)
		} else if outcome == "not durable" && (err == nil || !strings.Contains(err.Error(), "log append failed")) {
			t.Fatalf("%s: durable, once the settled commit failed: %v", outcome, err)
		}
		<-op.Done()
		s.Destroy()
	}
}
