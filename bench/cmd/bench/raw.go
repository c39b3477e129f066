package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// rawResult is what `bench raw` and `bench rawlog` report.
type rawResult struct {
	Messages int64   `json:"messages"`
	Sum      int64   `json:"sum"` // Of the values of the messages decoded.
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
}

// journalFlag is a repeated -journal NAME=END flag.
type journalFlag map[pb.Journal]int64

func (j journalFlag) String() string { return fmt.Sprint(map[pb.Journal]int64(j)) }

func (j journalFlag) Set(s string) error {
	var name, end, ok = strings.Cut(s, "=")
	var n, err = strconv.ParseInt(end, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("-journal %q: want NAME=END_OFFSET", s)
	}
	j[pb.Journal(name)] = n
	return nil
}

// rawMain runs `bench raw` (read and decode every message of the journals,
// each on its own goroutine, as a consumer's shards do) or `bench rawlog`
// (read the bytes of the journals), through the broker client, from offset
// 0 to each journal's END, and prints a rawResult.
func rawMain(mode string, args []string) error {
	var fs = flag.NewFlagSet("bench "+mode, flag.ContinueOnError)
	var broker = fs.String("broker", "", "broker endpoint")
	var journals = make(journalFlag)
	fs.Var(journals, "journal", "NAME=END_OFFSET of a journal to read (repeated)")
	if err := fs.Parse(args); err != nil {
		return err
	} else if *broker == "" || len(journals) == 0 {
		return errors.New("-broker and -journal are required")
	}
	pb.RegisterGRPCDispatcher("local")
	var jc, conn, err = brokerconn.Dial(pb.Endpoint(*broker), pb.NoopDispatchRouter{})
	if err != nil {
		return err
	}
	defer conn.Close()
	defer profile.Start()()

	var ctx = context.Background()
	var mu sync.Mutex
	var out rawResult
	var errs []error
	var wg sync.WaitGroup
	var began = time.Now()
	for journal, end := range journals {
		wg.Go(func() {
			var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, EndOffset: end})
			var n, sum int64
			var err error
			if mode == "raw" {
				n, sum, err = readMessages(rr)
			} else {
				_, err = io.CopyBuffer(io.Discard, rr, make([]byte, 1<<20))
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			mu.Lock()
			defer mu.Unlock()
			out.Messages += n
			out.Sum += sum
			out.Bytes += rr.Offset()
			if err != nil {
				errs = append(errs, fmt.Errorf("reading %s at %d: %w", journal, rr.Offset(), err))
			}
		})
	}
	wg.Wait()
	out.Seconds = time.Since(began).Seconds()
	if err = errors.Join(errs...); err != nil {
		return err
	}
	return workload.Report(os.Stdout, out)
}

// readMessages decodes the messages of rr, read-uncommitted, and returns
// their number and the total of their values.
func readMessages(rr *client.RetryReader) (n, sum int64, _ error) {
	var it = message.NewReadUncommittedIter(rr, benchv1.NewMessage)
	for {
		var env, err = it.Next()
		if err != nil {
			return n, sum, err
		}
		if add, ok := env.Message.(*benchv1.Add); ok {
			sum += add.Value
		}
		n++
	}
}
