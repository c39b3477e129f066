// Command anchor-recovery builds and plays back a RocksDB store recorded into
// a recovery log with Gazette's own consumer/recoverylog and
// consumer/store-rocksdb, as Gazette's consumer does, for the same state as
// ours-recovery:
//
//	anchor-recovery build -broker URL -log JOURNAL -dir DIR -hints FILE
//	anchor-recovery play  -broker URL -log JOURNAL -dir DIR -hints FILE [-check]
//
// build writes the state of benchstate.State into a new store in DIR through
// transactions committed as Gazette's consumer commits them, then writes
// the log's FSMHints to FILE as JSON (as Gazette stores them in etcd). play
// plays the log from those hints into DIR through its write head, then
// fsyncs what it played (timed apart: Gazette's player does not fsync).
// Each prints a JSON line of its figures (workload.Built, workload.Played).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
	"github.com/gazconsumer/gazconsumer/bench/internal/cli"
	"github.com/gazconsumer/gazconsumer/bench/internal/durable"
	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	rocks "github.com/jgraettinger/gorocksdb"
	log "github.com/sirupsen/logrus"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/consumer/recoverylog"
	store_rocksdb "go.gazette.dev/core/consumer/store-rocksdb"
	mbp "go.gazette.dev/core/mainboilerplate"
	"google.golang.org/grpc"
)

const name = "anchor-recovery"

func main() {
	var mode, f, err = cli.Parse(name, os.Args[1:])
	if err != nil {
		cli.Fatal(name, err)
	}
	log.SetLevel(log.WarnLevel) // Gazette logs every file of a playback at info.
	pb.RegisterGRPCDispatcher("local")
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var cfg mbp.ClientConfig
	cfg.Address = pb.Endpoint(f.Broker)
	var counted = &countingClient{RoutedJournalClient: cfg.MustRoutedJournalClient(ctx)}
	var ajc = client.NewAppendService(ctx, counted)

	if mode == "build" {
		err = build(ctx, ajc, f)
	} else {
		err = play(ctx, ajc, counted, f)
	}
	if err != nil {
		cli.Fatal(name, fmt.Errorf("%s %s: %w", mode, f.Log, err))
	}
}

func build(ctx context.Context, ajc client.AsyncJournalClient, f cli.Flags) error {
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return err
	}
	// Play the (empty) log and take it over, as a shard's first primary does.
	var player = recoverylog.NewPlayer()
	var author = recoverylog.NewRandomAuthor()
	player.InjectHandoff(author)
	if err := player.Play(ctx, recoverylog.FSMHints{Log: pb.Journal(f.Log)}, f.Dir, ajc); err != nil {
		return fmt.Errorf("fencing the log: %w", err)
	}
	var rec = recoverylog.NewRecorder(pb.Journal(f.Log), player.Resolved.FSM, author, f.Dir, ajc)
	var store = store_rocksdb.NewStore(rec)
	if err := store.Open(); err != nil {
		return err
	}
	defer store.Destroy()

	var began = time.Now()
	var k, v []byte
	var prev client.OpFuture
	var order = f.State.Order()
	for i, n := range order {
		store.WriteBatch.Put(benchstate.Key(k, n), benchstate.Value(v, n, f.State.ValueLen))
		if (i+1)%f.State.TxnLen != 0 && i != len(order)-1 {
			continue
		}
		// As Gazette's consumer: a transaction's StartCommit follows the
		// previous commit's completion.
		if prev != nil {
			if <-prev.Done(); prev.Err() != nil {
				return prev.Err()
			}
		}
		prev = store.StartCommit(nil, pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{
			"bench/state/input": {ReadThrough: int64(i + 1)},
		}}, nil)
	}
	if <-prev.Done(); prev.Err() != nil {
		return prev.Err()
	}
	hints, err := rec.BuildHints()
	if err != nil {
		return err
	}
	var head = rec.Barrier(nil)
	if <-head.Done(); head.Err() != nil {
		return head.Err()
	}
	var out = workload.Built{Seconds: time.Since(began).Seconds(), LogBytes: head.Response().Commit.End}
	if out.LiveBytes, err = cli.DirBytes(f.Dir); err != nil {
		return err
	}
	b, err := json.Marshal(hints)
	if err != nil {
		return err
	}
	if err = os.WriteFile(f.Hints, b, 0o600); err != nil {
		return err
	}
	return workload.Report(os.Stdout, out)
}

func play(ctx context.Context, ajc client.AsyncJournalClient, counted *countingClient, f cli.Flags) error {
	var b, err = os.ReadFile(f.Hints)
	if err != nil {
		return err
	}
	var hints recoverylog.FSMHints
	if err = json.Unmarshal(b, &hints); err != nil {
		return fmt.Errorf("hints %s: %w", f.Hints, err)
	}
	if err = os.Mkdir(f.Dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(f.Dir)

	var stop = profile.Start()
	var began = time.Now()
	var player = recoverylog.NewPlayer()
	player.FinishAtWriteHead()
	if err = player.Play(ctx, hints, f.Dir, ajc); err != nil {
		return err
	}
	var out = workload.Played{Seconds: time.Since(began).Seconds(), BytesRead: counted.read.Load()}
	stop()
	synced, err := durable.SyncTree(f.Dir)
	if err != nil {
		return err
	}
	out.SyncSeconds = synced.Seconds()

	began = time.Now()
	var opts = rocks.NewDefaultOptions()
	defer opts.Destroy()
	db, err := rocks.OpenDbForReadOnly(opts, f.Dir, false)
	if err != nil {
		return err
	}
	defer db.Close()
	out.OpenSeconds = time.Since(began).Seconds()
	if f.Check {
		var ro = rocks.NewDefaultReadOptions()
		defer ro.Destroy()
		var it = db.NewIterator(ro)
		defer it.Close()
		var c = f.State.NewChecker()
		for it.Seek([]byte("k")); it.ValidForPrefix([]byte("k")); it.Next() {
			if !c.Next(it.Key().Data(), it.Value().Data()) {
				break
			}
		}
		if err = c.Err(); err != nil {
			return err
		}
		out.Checked = true
	}
	return workload.Report(os.Stdout, out)
}

// countingClient counts the journal content its reads receive: Gazette's
// player does not say how much of the log it read.
type countingClient struct {
	pb.RoutedJournalClient
	read atomic.Int64
}

func (c *countingClient) Read(ctx context.Context, req *pb.ReadRequest, opts ...grpc.CallOption) (pb.Journal_ReadClient, error) {
	var rc, err = c.RoutedJournalClient.Read(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	return countingReads{rc, &c.read}, nil
}

// countingReads counts the content of the responses of a read.
type countingReads struct {
	pb.Journal_ReadClient
	read *atomic.Int64
}

func (r countingReads) Recv() (*pb.ReadResponse, error) {
	var resp, err = r.Journal_ReadClient.Recv()
	if resp != nil {
		r.read.Add(int64(len(resp.Content)))
	}
	return resp, err
}

// RecvMsg counts as Recv does: Gazette's client.Reader receives with it.
// (The embedded stream's own Recv calls its RecvMsg, not this one.)
func (r countingReads) RecvMsg(m any) error {
	var err = r.Journal_ReadClient.RecvMsg(m)
	if resp, ok := m.(*pb.ReadResponse); ok && err == nil {
		r.read.Add(int64(len(resp.Content)))
	}
	return err
}
