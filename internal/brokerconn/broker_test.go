package brokerconn_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// A broker takes the appends of a connection Dial made, large ones too
// (marshaled into pooled buffers), and serves them back: its requests have
// the content-type a Gazette server tells gRPC by.
func TestAppendsThroughABroker(t *testing.T) {
	var stack = devstacktest.StartT(t, devstacktest.Journals("conn", 1, 1<<20))
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var journal = pb.Journal("conn/00")
	var want []byte
	for i, n := range []int{10, 40 << 10, 3 << 20} {
		var content = bytes.Repeat([]byte{byte('a' + i)}, n)
		if _, err := client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: journal}, bytes.NewReader(content)); err != nil {
			t.Fatalf("appending %d bytes: %v", n, err)
		}
		want = append(want, content...)
	}
	var r = client.NewReader(ctx, stack.Journals(), pb.ReadRequest{Journal: journal, EndOffset: int64(len(want))})
	var got, err = io.ReadAll(r)
	if err != nil && err != client.ErrOffsetNotYetAvailable {
		t.Fatal(err)
	} else if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes back, want the %d appended", len(got), len(want))
	}
}
