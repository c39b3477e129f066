package service

import (
	"context"
	"errors"
	"testing"

	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// committedOf is a CommittedReader of one Reader.
type committedOf struct{ runtime.Reader }

func (c committedOf) ReadCommitted(_ context.Context, fn func(runtime.Reader) error) error {
	return fn(c.Reader)
}

// viewOf is an OwnedViewer whose views of shard "mine" are hidden, and
// which fails for shard "broken".
type viewOf struct{ hidden runtime.Reader }

func (v viewOf) OwnedView(id pc.ShardID, r runtime.Reader) (runtime.Reader, error) {
	switch id {
	case "mine":
		return v.hidden, nil
	case "broken":
		return nil, errors.New("no record")
	}
	return r, nil
}

type emptyReader struct{ name string }

func (emptyReader) Get([]byte) ([]byte, bool, error)                       { return nil, false, nil }
func (emptyReader) Scan(_, _ []byte, _ func(key, value []byte) bool) error { return nil }

// Queries read a shard's committed state through the application's owned
// view of it, and fail with the view's error.
func TestQueriesReadTheOwnedView(t *testing.T) {
	var committed, hidden = emptyReader{"committed"}, emptyReader{"hidden"}
	for _, tc := range []struct {
		id   pc.ShardID
		want runtime.Reader
	}{{"mine", hidden}, {"other", committed}} {
		var got runtime.Reader
		var store = ownedStore{CommittedReader: committedOf{committed}, id: tc.id, viewer: viewOf{hidden}}
		if err := store.ReadCommitted(context.Background(), func(r runtime.Reader) error { got = r; return nil }); err != nil {
			t.Fatal(err)
		} else if got != tc.want {
			t.Errorf("shard %s: read %v, want %v", tc.id, got, tc.want)
		}
	}
	var store = ownedStore{CommittedReader: committedOf{committed}, id: "broken", viewer: viewOf{hidden}}
	if err := store.ReadCommitted(context.Background(), func(runtime.Reader) error { return nil }); err == nil {
		t.Error("the view's error was not returned")
	}
}
