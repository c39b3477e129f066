// Package progress follows consumer applications as they work: the messages
// and transactions their shards have committed (from the members' metrics),
// and how many bytes of their sources they have yet to read (from the Shard
// API's Stat and the brokers' write heads).
package progress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// App is a consumer application to follow.
type App struct {
	// Name to display.
	Name string
	// Shards is the Shard API of any member of the application.
	Shards pc.ShardClient
}

// Status is one reading of an App.
type Status struct {
	Name string
	// Shards is the number of shards, and Primaries those with a primary.
	Shards, Primaries int
	// Messages and Transactions committed by the shards' current primaries
	// since their processes started.
	Messages, Transactions int64
	// Lag is the number of bytes of the sources the shards have yet to
	// read through, to the write heads of when the reading was taken.
	Lag int64
	// CaughtUp is set once every shard has a primary that has committed
	// its reads through the write heads of all its sources.
	CaughtUp bool
}

// Follower takes readings of applications.
type Follower struct {
	jc    pb.RoutedJournalClient
	sec   brokerconn.Security
	apps  []App
	mu    sync.Mutex
	conns map[pb.Endpoint]*grpc.ClientConn
	http  *http.Client
}

// NewFollower returns a Follower of apps, whose sources it reads the write
// heads of through jc. It calls the members that are primaries of the
// apps' shards with sec: over TLS (sec.TLS) for https:// members, whose
// metrics too it reads with sec.TLS's client certificate, authorized by
// sec.Auth.
func NewFollower(jc pb.RoutedJournalClient, sec brokerconn.Security, apps ...App) *Follower {
	var transport = http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = sec.TLS
	return &Follower{jc: jc, sec: sec, apps: apps, conns: make(map[pb.Endpoint]*grpc.ClientConn),
		http: &http.Client{Timeout: 5 * time.Second, Transport: transport}}
}

// Close closes the connections to the members.
func (f *Follower) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ep, conn := range f.conns {
		_ = conn.Close()
		delete(f.conns, ep)
	}
}

// Read takes a reading of every application, in order. An application is
// read only after those before it: when the applications form a pipeline,
// each downstream one is caught up only with what its upstream ones had
// committed. A failed shard is an error, naming the shard and its failure.
func (f *Follower) Read(ctx context.Context) ([]Status, error) {
	var out []Status
	for _, app := range f.apps {
		var st, err = f.read(ctx, app)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", app.Name, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func (f *Follower) read(ctx context.Context, app App) (Status, error) {
	var st = Status{Name: app.Name, CaughtUp: true}
	var list, err = app.Shards.List(ctx, &pc.ListRequest{})
	if err != nil {
		return st, fmt.Errorf("listing shards: %w", err)
	} else if list.Status != pc.Status_OK {
		return st, fmt.Errorf("listing shards: %s", list.Status)
	}
	st.Shards = len(list.Shards)
	st.CaughtUp = st.Shards != 0
	var members = make(map[pb.Endpoint][]string) // Shards by primary endpoint.

	for _, sh := range list.Shards {
		for _, rs := range sh.Status {
			if rs.Code == pc.ReplicaStatus_FAILED {
				return st, &ShardFailedError{Shard: sh.Spec.Id, Errors: rs.Errors}
			}
		}
		// Write heads are read before the shard's progress, so that a shard
		// caught up with them has read all that was committed before.
		var heads = make(map[pb.Journal]pb.Offset, len(sh.Spec.Sources))
		for _, src := range sh.Spec.Sources {
			if heads[src.Journal], err = f.writeHead(ctx, src.Journal); err != nil {
				return st, err
			}
		}
		if sh.Route.Primary == -1 || len(sh.Route.Endpoints) == 0 {
			st.CaughtUp = false
			continue
		}
		var ep = sh.Route.Endpoints[sh.Route.Primary]
		stat, err := f.stat(ctx, ep, sh.Spec.Id)
		if err != nil {
			return st, err
		} else if stat.Status != pc.Status_OK {
			st.CaughtUp = false // Between primaries.
			continue
		}
		st.Primaries++
		members[ep] = append(members[ep], sh.Spec.Id.String())
		for j, head := range heads {
			if lag := head - stat.ReadThrough[j]; lag > 0 {
				st.Lag += lag
				st.CaughtUp = false
			}
		}
	}
	for ep, shards := range members {
		var msgs, txns, err = f.metrics(ctx, ep, shards)
		if err != nil {
			return st, err
		}
		st.Messages += msgs
		st.Transactions += txns
	}
	return st, nil
}

// writeHead returns the write head of journal.
func (f *Follower) writeHead(ctx context.Context, journal pb.Journal) (pb.Offset, error) {
	var ctx2, cancel = context.WithCancel(ctx)
	defer cancel()
	var stream, err = f.jc.Read(pb.WithDispatchDefault(ctx2), &pb.ReadRequest{Journal: journal, Offset: 0, MetadataOnly: true})
	if err != nil {
		return 0, fmt.Errorf("reading the write head of %s: %w", journal, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return 0, fmt.Errorf("reading the write head of %s: %w", journal, err)
	} else if resp.Status != pb.Status_OK && resp.Status != pb.Status_OFFSET_NOT_YET_AVAILABLE {
		return 0, fmt.Errorf("reading the write head of %s: %s", journal, resp.Status)
	}
	return resp.WriteHead, nil
}

// stat asks the primary at ep how far shard has read.
func (f *Follower) stat(ctx context.Context, ep pb.Endpoint, shard pc.ShardID) (*pc.StatResponse, error) {
	f.mu.Lock()
	var conn, ok = f.conns[ep]
	f.mu.Unlock()
	if !ok {
		var creds = insecure.NewCredentials()
		if ep.URL().Scheme == "https" {
			var cfg = f.sec.TLS
			if cfg == nil {
				cfg = &tls.Config{}
			}
			creds = credentials.NewTLS(cfg)
		}
		var c, err = grpc.NewClient(ep.GRPCAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("dialing %s: %w", ep, err)
		}
		f.mu.Lock()
		f.conns[ep], conn = c, c
		f.mu.Unlock()
	}
	var authorizer = f.sec.Auth
	if authorizer == nil {
		authorizer = auth.NewNoopAuth()
	}
	var resp, err = pc.NewAuthShardClient(pc.NewShardClient(conn), authorizer).Stat(ctx, &pc.StatRequest{Shard: shard})
	if err != nil {
		return nil, fmt.Errorf("shard %s at %s: stat: %w", shard, ep, err)
	}
	return resp, nil
}

// metrics sums the messages and transactions that the member at ep counts
// for shards.
func (f *Follower) metrics(ctx context.Context, ep pb.Endpoint, shards []string) (msgs, txns int64, err error) {
	var req *http.Request
	if req, err = http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(string(ep), "/")+"/metrics", nil); err != nil {
		return 0, 0, err
	}
	resp, err := f.http.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("metrics of %s: %w", ep, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, 0, fmt.Errorf("metrics of %s: %s", ep, resp.Status)
	}
	var parser = expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("metrics of %s: %w", ep, err)
	}
	var sum = func(name string) int64 {
		var total float64
		var fam, ok = families[name]
		if !ok {
			return 0
		}
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if l.GetName() == "shard" && contains(shards, l.GetValue()) {
					total += m.GetCounter().GetValue()
				}
			}
		}
		return int64(total)
	}
	return sum("gazconsumer_shard_messages_total"), sum("gazconsumer_shard_transactions_total"), nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ShardFailedError is the error of a reading that found a failed shard.
type ShardFailedError struct {
	Shard  pc.ShardID
	Errors []string
}

func (e *ShardFailedError) Error() string {
	return fmt.Sprintf("shard %s failed: %s", e.Shard, strings.Join(e.Errors, "; "))
}

// Wait takes readings every interval, showing each through show, until every
// application is caught up in one reading taken after done is closed, and
// returns the last reading. A reading that fails (a member restarting, say)
// is retried; a failed shard ends the wait with its ShardFailedError, and
// the end of ctx with the last failure, if any.
func (f *Follower) Wait(ctx context.Context, interval time.Duration, done <-chan struct{}, show func([]Status)) ([]Status, error) {
	var ticker = time.NewTicker(interval)
	defer ticker.Stop()
	var lastErr error
	for {
		var finished bool
		select {
		case <-done:
			finished = true
		default:
		}
		var sts, err = f.Read(ctx)
		var failed *ShardFailedError
		if errors.As(err, &failed) {
			return nil, err
		} else if err != nil {
			lastErr = err
		} else {
			if show != nil {
				show(sts)
			}
			var all = finished
			for _, st := range sts {
				all = all && st.CaughtUp
			}
			if all {
				return sts, nil
			}
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("%w (last reading: %w)", ctx.Err(), lastErr)
			}
			return nil, ctx.Err()
		}
	}
}
