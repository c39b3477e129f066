package runtime_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// prefetchingStore is a KVPrefetcher recording the keys it is asked to
// read ahead.
type prefetchingStore struct {
	runtime.Store
	keys []string
	err  error
	pass bool // Passes on batches.
}

func (s *prefetchingStore) Prefetching() bool { return !s.pass }

func (s *prefetchingStore) Prefetch(p *runtime.Prefetch) error {
	for i := range p.Len() {
		s.keys = append(s.keys, string(p.Key(i)))
	}
	return s.err
}

// An Adapter reads ahead, through its store, the keys that the ReadsAhead of
// its inputs name, in one batch of messages: those of inputs without one
// read nothing.
func TestAdapterPrefetch(t *testing.T) {
	var c = *counter
	c.Inputs = []runtime.Input[counterHandler, *counterTxn]{
		runtime.ReadsAhead(runtime.Handle("test.Order", labels.ContentType_JSONLines, "OnOrder", counterHandler.OnOrder),
			func(msg *order, p *runtime.Prefetch) {
				p.Add(append(p.Append(), "customer/"+msg.Customer...))
			}),
	}
	var lister = runtime.PartitionListerFunc(func(pb.LabelSelector) message.PartitionsFunc { return nil })
	var a, err = runtime.NewAdapter(&c, counterHandler(new(summer)), nil, lister)
	if err != nil {
		t.Fatal(err)
	}
	var store = new(prefetchingStore)
	var msgs = []message.Message{&order{Customer: "ann"}, &total{Customer: "bob"}, &order{Customer: "cy"}}
	if err = a.Prefetch(nil, store, msgs); err != nil {
		t.Fatal(err)
	}
	if want := []string{"customer/ann", "customer/cy"}; !slices.Equal(store.keys, want) {
		t.Errorf("read ahead %q, want %q", store.keys, want)
	}
	store.err = errors.New("no reads today")
	if err = a.Prefetch(nil, store, msgs[:1]); err == nil || !strings.Contains(err.Error(), "test.Counter: reading ahead the rows of 1 messages: no reads today") {
		t.Errorf("a failed prefetch: %v", err)
	}
	// A store passing on a batch is asked nothing.
	store = &prefetchingStore{pass: true}
	if err = a.Prefetch(nil, store, msgs); err != nil || len(store.keys) != 0 {
		t.Errorf("a store passing on the batch read ahead %q: %v", store.keys, err)
	}
	// Without a ReadsAhead, nothing is asked of the store.
	if a, err = runtime.NewAdapter(counter, counterHandler(new(summer)), nil, lister); err != nil {
		t.Fatal(err)
	}
	store = new(prefetchingStore)
	if err = a.Prefetch(nil, store, msgs); err != nil || len(store.keys) != 0 {
		t.Errorf("an adapter without ReadsAhead read ahead %q: %v", store.keys, err)
	}
}

// Prefetch's keys are each what was appended, and Reset empties it.
func TestPrefetchKeys(t *testing.T) {
	var p runtime.Prefetch
	for _, k := range []string{"a", "", "bcd"} {
		p.Add(append(p.Append(), k...))
	}
	if p.Len() != 3 || string(p.Key(0)) != "a" || string(p.Key(1)) != "" || string(p.Key(2)) != "bcd" {
		t.Fatalf("keys %q %q %q of %d", p.Key(0), p.Key(1), p.Key(2), p.Len())
	}
	// A key's slice is capped: appending to it doesn't write its successor.
	_ = append(p.Key(0), 'x')
	if string(p.Key(1)) != "" || string(p.Key(2)) != "bcd" {
		t.Fatalf("appending to a key wrote %q %q", p.Key(1), p.Key(2))
	}
	p.Reset()
	if p.Len() != 0 {
		t.Fatalf("%d keys after Reset", p.Len())
	}
}
