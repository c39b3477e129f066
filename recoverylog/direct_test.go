package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
)

// A process that can't read a store's fragments finds so once a while, not
// at every playback; one that can reads them directly; a probe that hangs
// gives up; and a probe has the brokers sign one URL, of the fragment the
// playback reads first.
func TestDirectReadsProbeAStoreOnce(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xE1)
	m.create("data.sst")
	for i := range 8 {
		m.write("data.sst", bytes.Repeat([]byte{byte(i), 0xE1}, 20<<10), -1) // 40 KiB.
	}
	m.hints()
	m.create("more") // Rolls the brokers' spool of the content above.
	m.write("more", []byte("more"), -1)
	var hints = m.hints()
	var store = waitPersisted(t, ctx, journal, firstOffset(journal, hints))
	forgetUnreadableStores()
	t.Cleanup(forgetUnreadableStores)

	var opens = countOpens(t)
	var calls = &probeCalls{RoutedJournalClient: stack.Journals()}
	var counted = map[string]float64{
		"store":   testutil.ToFloat64(playbacks.WithLabelValues("store")),
		"brokers": testutil.ToFloat64(playbacks.WithLabelValues("brokers")),
	}
	var playDirect = func(author Author) *Player {
		t.Helper()
		var p = NewPlayer(calls, journal, t.TempDir(), author)
		p.DoNotProxy = true
		p.FinishAtWriteHead()
		if _, err := p.Play(ctx, hints); err != nil {
			t.Fatalf("playback with DoNotProxy: %v", err)
		}
		sameTree(t, m.dir, p.dir)
		var where = map[bool]string{true: "store", false: "brokers"}[p.direct]
		if n := testutil.ToFloat64(playbacks.WithLabelValues(where)); n != counted[where]+1 {
			t.Fatalf("playbacks reading from the %s counted %v, want %v", where, n, counted[where]+1)
		}
		counted[where]++
		return p
	}

	// No file:// transport: the probe opens the fragment, fails, and the
	// player reads through the brokers.
	if p := playDirect(0xE2); p.direct || *opens != 1 {
		t.Fatalf("without a file transport: direct %v after %d opens, want false after 1", p.direct, *opens)
	} else if _, ok := unreadableSince(store, time.Now()); !ok {
		t.Fatalf("store %s is not remembered as unreadable", store)
	}
	if reqs := calls.metadataReads(); len(reqs) != 1 || reqs[0].Offset != firstOffset(journal, hints) {
		t.Fatalf("a probe read the metadata of %+v, want one read at %d", reqs, firstOffset(journal, hints))
	} else if calls.listings != 0 {
		t.Fatalf("a probe listed fragments %d times", calls.listings)
	}
	// Another playback doesn't open it again.
	if p := playDirect(0xE3); p.direct || *opens != 1 {
		t.Fatalf("store known unreadable: direct %v after %d opens, want false after 1", p.direct, *opens)
	}

	// Once probeRetry has passed, with the transport, it reads directly.
	defer client.InstallFileTransport(stack.FragmentsRoot())()
	markUnreadable(store, time.Now().Add(-probeRetry))
	if p := playDirect(0xE4); !p.direct || *opens != 2 {
		t.Fatalf("with a file transport: direct %v after %d opens, want true after 2", p.direct, *opens)
	} else if _, ok := unreadableSince(store, time.Now()); ok {
		t.Fatalf("store %s is still remembered as unreadable", store)
	}

	// An open that hangs, as of a store beyond the network, gives up.
	var timeout = probeTimeout
	t.Cleanup(func() { probeTimeout = timeout })
	probeTimeout = 200 * time.Millisecond
	openFragmentURL = func(ctx context.Context, _ pb.Fragment, _ int64, _ string) (*client.FragmentReader, error) {
		*opens++
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var began = time.Now()
	if p := playDirect(0xE5); p.direct || *opens != 3 {
		t.Fatalf("a hung probe: direct %v after %d opens, want false after 3", p.direct, *opens)
	} else if took := time.Since(began); took > time.Minute {
		t.Fatalf("a hung probe held the playback %s", took)
	} else if _, ok := unreadableSince(store, time.Now()); !ok {
		t.Fatalf("store %s is not remembered as unreadable after a hung probe", store)
	}

	// A playback whose context ends during the probe fails with it.
	markReadable(store)
	var cctx, ccancel = context.WithCancel(ctx)
	openFragmentURL = func(ctx context.Context, _ pb.Fragment, _ int64, _ string) (*client.FragmentReader, error) {
		ccancel()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var p = NewPlayer(calls, journal, t.TempDir(), 0xE6)
	p.DoNotProxy = true
	p.FinishAtWriteHead()
	if _, err := p.Play(cctx, hints); !errors.Is(err, context.Canceled) {
		t.Fatalf("playback cancelled during its probe: %v", err)
	} else if _, ok := unreadableSince(store, time.Now()); ok {
		t.Fatalf("a cancelled probe marked store %s unreadable", store)
	}
}

// A log whose first fragment isn't persisted is read through the brokers,
// without an open: nothing tells whether the process could open the URLs of
// fragments persisted later, which brokers would answer its reads with.
func TestDirectReadsOfAnUnpersistedLog(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xE8)
	m.create("small")
	m.write("small", []byte("small"), -1)
	var opens = countOpens(t)
	var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xE9)
	p.DoNotProxy = true
	p.FinishAtWriteHead()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Play(ctx, m.hints()); err != nil {
		t.Fatal(err)
	} else if *opens != 0 || p.direct {
		t.Fatalf("nothing persisted: %d opens, direct %v; want none, false", *opens, p.direct)
	}
	sameTree(t, m.dir, p.dir)
}

// countOpens counts the opens of fragments' URLs by probes, until the test
// ends.
func countOpens(t *testing.T) *int {
	var opens int
	var open = openFragmentURL
	t.Cleanup(func() { openFragmentURL = open })
	openFragmentURL = func(ctx context.Context, f pb.Fragment, offset int64, url string) (*client.FragmentReader, error) {
		opens++
		return open(ctx, f, offset, url)
	}
	return &opens
}

// waitPersisted waits until the fragment of journal at offset is persisted,
// and returns its store.
func waitPersisted(t *testing.T, ctx context.Context, journal pb.Journal, offset int64) pb.FragmentStore {
	t.Helper()
	for {
		var resp, err = client.ListAllFragments(ctx, stack.Journals(), pb.FragmentsRequest{Journal: journal})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range resp.Fragments {
			if f.Spec.Begin <= offset && offset < f.Spec.End && f.Spec.BackingStore != "" {
				return f.Spec.BackingStore
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(errors.Join(ctx.Err(), fmt.Errorf("the fragment of %s at %d was not persisted", journal, offset)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// forgetUnreadableStores forgets what probes of this process found.
func forgetUnreadableStores() {
	unreadable.Lock()
	defer unreadable.Unlock()
	clear(unreadable.since)
}

// probeCalls is a journal client which records the reads of metadata and
// counts the fragment listings asked of it.
type probeCalls struct {
	pb.RoutedJournalClient
	mu       sync.Mutex
	reads    []pb.ReadRequest
	listings int
}

func (c *probeCalls) Read(ctx context.Context, req *pb.ReadRequest, opts ...grpc.CallOption) (pb.Journal_ReadClient, error) {
	if req.MetadataOnly {
		c.mu.Lock()
		c.reads = append(c.reads, *req)
		c.mu.Unlock()
	}
	return c.RoutedJournalClient.Read(ctx, req, opts...)
}

func (c *probeCalls) ListFragments(ctx context.Context, req *pb.FragmentsRequest, opts ...grpc.CallOption) (*pb.FragmentsResponse, error) {
	c.mu.Lock()
	c.listings++
	c.mu.Unlock()
	return c.RoutedJournalClient.ListFragments(ctx, req, opts...)
}

func (c *probeCalls) metadataReads() []pb.ReadRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pb.ReadRequest(nil), c.reads...)
}
