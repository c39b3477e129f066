// Command ours-recovery builds and plays back a RocksDB store recorded into
// a recovery log with gazconsumer's store/rocks and recoverylog, as
// cmd/recoverybench does:
//
//	ours-recovery build -broker URL -log JOURNAL -dir DIR -hints FILE
//	ours-recovery play  -broker URL -log JOURNAL -dir DIR -hints FILE [-check]
//
// build writes the state of benchstate.State into a new store in DIR through
// pipelined transactions, then writes the log's hints to FILE. play plays
// the log from those hints into DIR (which must not exist) through its write
// head, as a shard recovering it does, then fsyncs what it played (timed
// apart: recoverylog's player does not fsync). Each prints a JSON line of its
// figures (workload.Built, workload.Played).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
	"github.com/gazconsumer/gazconsumer/bench/internal/cli"
	"github.com/gazconsumer/gazconsumer/bench/internal/durable"
	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/protobuf/proto"
)

const name = "ours-recovery"

func main() {
	var mode, f, err = cli.Parse(name, os.Args[1:])
	if err != nil {
		cli.Fatal(name, err)
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	pb.RegisterGRPCDispatcher("local")
	jc, conn, err := brokerconn.Dial(pb.Endpoint(f.Broker), pb.NoopDispatchRouter{})
	if err != nil {
		cli.Fatal(name, err)
	}
	defer conn.Close()

	var ctx = context.Background()
	if mode == "build" {
		err = build(ctx, jc, f)
	} else {
		err = play(ctx, jc, f)
	}
	if err != nil {
		cli.Fatal(name, fmt.Errorf("%s %s: %w", mode, f.Log, err))
	}
}

// author of the build's recorder; plays use authors of their own.
const author recoverylog.Author = 0xB1

func build(ctx context.Context, jc pb.RoutedJournalClient, f cli.Flags) error {
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return err
	}
	var p = recoverylog.NewPlayer(jc, pb.Journal(f.Log), f.Dir, author)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, nil)
	if err != nil {
		return fmt.Errorf("fencing the log: %w", err)
	}
	var actx, cancel = context.WithCancel(ctx)
	defer cancel()
	rec, err := recoverylog.NewRecorder(pb.Journal(f.Log), fsm, author, f.Dir, client.NewAppendService(actx, jc))
	if err != nil {
		return err
	}
	store, err := rocks.Open(f.Dir, rec, rocks.Options{})
	if err != nil {
		return err
	}
	defer store.Destroy()

	var began = time.Now()
	var k, v []byte
	var prev client.OpFuture
	var order = f.State.Order()
	for i, n := range order {
		if err = store.Put(benchstate.Key(k, n), benchstate.Value(v, n, f.State.ValueLen)); err != nil {
			return err
		}
		if (i+1)%f.State.TxnLen != 0 && i != len(order)-1 {
			continue
		}
		// Pipelined as the runtime commits: the next commit starts once the
		// previous one is durable, while its Puts were made meanwhile.
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
	hints, err := rec.Hints(ctx)
	if err != nil {
		return err
	}
	var out = workload.Built{Seconds: time.Since(began).Seconds(), LogBytes: hints.NextOffset}
	if out.LiveBytes, err = cli.DirBytes(f.Dir); err != nil {
		return err
	}
	b, err := proto.Marshal(hints)
	if err != nil {
		return err
	}
	if err = os.WriteFile(f.Hints, b, 0o600); err != nil {
		return err
	}
	return workload.Report(os.Stdout, out)
}

func play(ctx context.Context, jc pb.RoutedJournalClient, f cli.Flags) error {
	var b, err = os.ReadFile(f.Hints)
	if err != nil {
		return err
	}
	var hints = new(recoverylog.Hints)
	if err = proto.Unmarshal(b, hints); err != nil {
		return fmt.Errorf("hints %s: %w", f.Hints, err)
	}
	if err = os.Mkdir(f.Dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(f.Dir)

	var stop = profile.Start()
	var began = time.Now()
	var p = recoverylog.NewPlayer(jc, pb.Journal(f.Log), f.Dir, recoverylog.Author(0xB2+time.Now().UnixNano()%1000))
	p.FinishAtWriteHead()
	if _, err = p.Play(ctx, hints); err != nil {
		return err
	}
	var out = workload.Played{Seconds: time.Since(began).Seconds(), BytesRead: p.BytesRead()}
	stop()
	synced, err := durable.SyncTree(f.Dir)
	if err != nil {
		return err
	}
	out.SyncSeconds = synced.Seconds()

	began = time.Now()
	ro, err := rocks.OpenReadOnly(f.Dir)
	if err != nil {
		return err
	}
	defer ro.Close()
	out.OpenSeconds = time.Since(began).Seconds()
	if f.Check {
		if err = checkKV(ro, f.State); err != nil {
			return err
		}
		out.Checked = true
	}
	return workload.Report(os.Stdout, out)
}

// checkKV checks the keys and values of kv.
func checkKV(kv *rocks.ReadOnly, s benchstate.State) error {
	var c = s.NewChecker()
	if err := kv.Scan([]byte("k"), []byte("l"), c.Next); err != nil {
		return err
	}
	return c.Err()
}
