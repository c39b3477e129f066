package sums

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
)

// Throughput compares the rate at which shards consume messages end to
// end with the rate at which the same journals are merely read.
type Throughput struct {
	Messages int
	// Raw is the time to read and decode every message of the inputs,
	// read-uncommitted, each input on its own goroutine.
	Raw time.Duration
	// Consume is the time from applying the shards until every shard has
	// committed its reads through its input's write head: assignment,
	// recovery of empty stores, and consumption in exactly-once transactions
	// which update the stores and publish onward.
	Consume time.Duration
}

// RawRate is messages read per second.
func (t Throughput) RawRate() float64 { return float64(t.Messages) / t.Raw.Seconds() }

// ConsumeRate is messages consumed per second.
func (t Throughput) ConsumeRate() float64 { return float64(t.Messages) / t.Consume.Seconds() }

// Ratio is ConsumeRate over RawRate.
func (t Throughput) Ratio() float64 { return t.ConsumeRate() / t.RawRate() }

// MeasureThroughput publishes n messages over the inputs, reads them raw,
// then applies the shards (amended by edit, if not nil) through a live
// member, and times their consumption. The shards must not exist yet.
func (c *Cluster) MeasureThroughput(ctx context.Context, n int, edit func(*pc.ShardSpec)) (Throughput, error) {
	var out = Throughput{Messages: n}
	var live = c.Live()
	if len(live) == 0 {
		return out, errors.New("no live member")
	}
	var feedCtx, stopFeed = context.WithCancel(ctx)
	defer stopFeed()
	var feed = c.NewFeed(feedCtx)
	for left := n; left > 0; left -= min(left, 10000) {
		if err := feed.Publish(min(left, 10000)); err != nil {
			return out, err
		}
	}

	var began = time.Now()
	var read, err = c.ReadInputs(ctx)
	if err != nil {
		return out, err
	} else if read != n {
		return out, fmt.Errorf("read %d messages of the %d published", read, n)
	}
	out.Raw = time.Since(began)

	began = time.Now()
	if err = c.ApplyShards(ctx, live[0], edit); err != nil {
		return out, err
	}
	if err = c.WaitCaughtUp(ctx); err != nil {
		return out, err
	}
	out.Consume = time.Since(began)
	return out, nil
}

// ReadInputs reads and decodes the messages of the inputs through their
// write heads, read-uncommitted, and returns their number.
func (c *Cluster) ReadInputs(ctx context.Context) (int, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int
	var errs []error
	for i := range c.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n, err = readInput(ctx, c.Stack.Journals(), c.Input(i))
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

func readInput(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal) (int, error) {
	var head, err = membertest.WriteHead(ctx, jc, journal)
	if err != nil {
		return 0, err
	}
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, EndOffset: head})
	var it = message.NewReadUncommittedIter(rr, App{}.NewMessage)
	var n int
	for {
		switch _, err = it.Next(); {
		case errors.Is(err, io.EOF):
			return n, nil
		case err != nil:
			return n, fmt.Errorf("reading %s at %d: %w", journal, rr.Offset(), err)
		}
		n++
	}
}
