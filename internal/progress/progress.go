// Package progress follows consumer applications as they work: the messages
// and transactions their shards have committed (from the members' metrics),
// and how many bytes of their sources they have yet to read (from the Shard
// API's Stat and the brokers' write heads). bankctl shows it on a terminal
// and the web console (package console) in a browser, through its Members.
package progress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
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
	jc      pb.RoutedJournalClient
	apps    []App
	members *Members
}

// NewFollower returns a Follower of apps, whose sources it reads the write
// heads of through jc. It calls the members that are primaries of the
// apps' shards with sec: over TLS (sec.TLS) for https:// members, whose
// metrics too it reads with sec.TLS's client certificate, authorized by
// sec.Auth.
func NewFollower(jc pb.RoutedJournalClient, sec brokerconn.Security, apps ...App) *Follower {
	return &Follower{jc: jc, apps: apps, members: NewMembers(sec)}
}

// Close closes the connections to the members.
func (f *Follower) Close() { f.members.Close() }

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
		var heads, err = WriteHeads(ctx, f.jc, sh.Spec.Sources)
		if err != nil {
			return st, err
		}
		if sh.Route.Primary == -1 || len(sh.Route.Endpoints) == 0 {
			st.CaughtUp = false
			continue
		}
		var ep = sh.Route.Endpoints[sh.Route.Primary]
		stat, err := f.members.Stat(ctx, ep, sh.Spec.Id)
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
		var m, err = f.members.Metrics(ctx, ep)
		if err != nil {
			return st, err
		}
		for _, shard := range shards {
			st.Messages += int64(m.Value(MessagesTotal, "shard", shard))
			st.Transactions += int64(m.Value(TransactionsTotal, "shard", shard))
		}
	}
	return st, nil
}

// The names of the members' metrics (runtime/shardmetrics) that readings
// take.
const (
	MessagesTotal     = "gazconsumer_shard_messages_total"
	TransactionsTotal = "gazconsumer_shard_transactions_total"
	BytesTotal        = "gazconsumer_shard_bytes_total"
	FailuresTotal     = "gazconsumer_shard_failures_total"
	TxnSeconds        = "gazconsumer_shard_transaction_duration_seconds"
	PhaseSeconds      = "gazconsumer_shard_transaction_phase_seconds_total"
	RecoveryPlayed    = "gazconsumer_shard_recovery_played_bytes"
	RecoveryRemaining = "gazconsumer_shard_recovery_remaining_bytes"
	RescalePhase      = "gazconsumer_shard_rescale_phase"
	RescaleDropped    = "gazconsumer_shard_rescale_dropped_rows"
	RescaleThrough    = "gazconsumer_shard_rescale_drop_progress_ratio"
)

// WriteHead returns the write head of journal.
func WriteHead(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal) (pb.Offset, error) {
	return source.WriteHead(ctx, jc, journal)
}

// WriteHeads returns the write heads of the journals of sources.
func WriteHeads(ctx context.Context, jc pb.RoutedJournalClient, sources []pc.ShardSpec_Source) (map[pb.Journal]pb.Offset, error) {
	var heads = make(map[pb.Journal]pb.Offset, len(sources))
	for _, src := range sources {
		var head, err = WriteHead(ctx, jc, src.Journal)
		if err != nil {
			return nil, err
		}
		heads[src.Journal] = head
	}
	return heads, nil
}

// Members calls the members of consumer applications, keeping a connection
// to each: their Shard API, their gRPC services, and their metrics. It may
// be used concurrently.
type Members struct {
	sec   brokerconn.Security
	dial  func(pb.Endpoint) (*grpc.ClientConn, error)
	mu    sync.Mutex
	conns map[pb.Endpoint]*grpc.ClientConn
	http  *http.Client
}

// NewMembers returns Members calling members with sec: over TLS (sec.TLS)
// for https:// members, whose metrics too it reads with sec.TLS's client
// certificate, authorized by sec.Auth.
func NewMembers(sec brokerconn.Security) *Members {
	var transport = http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = sec.TLS
	return &Members{sec: sec, dial: query.Dialer(sec.TLS), conns: make(map[pb.Endpoint]*grpc.ClientConn),
		http: &http.Client{Timeout: 5 * time.Second, Transport: transport}}
}

// Close closes the connections to the members.
func (m *Members) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ep, conn := range m.conns {
		_ = conn.Close()
		delete(m.conns, ep)
	}
	m.http.CloseIdleConnections()
}

// Authorizer returns what authorizes calls to members: sec.Auth, or one
// authorizing nothing.
func (m *Members) Authorizer() pb.Authorizer {
	if m.sec.Auth == nil {
		return auth.NewNoopAuth()
	}
	return m.sec.Auth
}

// Conn returns the connection to the member at ep.
func (m *Members) Conn(ep pb.Endpoint) (*grpc.ClientConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if conn, ok := m.conns[ep]; ok {
		return conn, nil
	}
	var conn, err = m.dial(ep)
	if err != nil {
		return nil, fmt.Errorf("dialing member %s: %w", ep, err)
	}
	m.conns[ep] = conn
	return conn, nil
}

// Shards returns a client of the Shard API of the member at ep, whose
// calls are authorized.
func (m *Members) Shards(ep pb.Endpoint) (pc.ShardClient, error) {
	var conn, err = m.Conn(ep)
	if err != nil {
		return nil, err
	}
	return pc.NewAuthShardClient(pc.NewShardClient(conn), m.Authorizer()), nil
}

// Stat asks the member at ep (the primary of shard, or one that proxies
// to it) how far shard has read.
func (m *Members) Stat(ctx context.Context, ep pb.Endpoint, shard pc.ShardID) (*pc.StatResponse, error) {
	var sc, err = m.Shards(ep)
	if err != nil {
		return nil, err
	}
	resp, err := sc.Stat(ctx, &pc.StatRequest{Shard: shard})
	if err != nil {
		return nil, fmt.Errorf("shard %s at %s: stat: %w", shard, ep, err)
	}
	return resp, nil
}

// Metrics reads the metrics the member at ep serves at /metrics.
func (m *Members) Metrics(ctx context.Context, ep pb.Endpoint) (Metrics, error) {
	var req, err = http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(string(ep), "/")+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", ep, err)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", ep, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("metrics of %s: %s", ep, resp.Status)
	}
	var parser = expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", ep, err)
	}
	return Metrics(families), nil
}

// Metrics are the metric families a member serves, by name.
type Metrics map[string]*dto.MetricFamily

// Value returns the sum of the values of the counters, gauges or
// untyped metrics of family name whose labels have the values given, as
// pairs of label name and value; a histogram's is its sum, and its count
// is CountOf's.
func (m Metrics) Value(name string, labelValues ...string) float64 {
	var total float64
	m.each(name, labelValues, func(x *dto.Metric) {
		switch {
		case x.Counter != nil:
			total += x.Counter.GetValue()
		case x.Gauge != nil:
			total += x.Gauge.GetValue()
		case x.Untyped != nil:
			total += x.Untyped.GetValue()
		case x.Histogram != nil:
			total += x.Histogram.GetSampleSum()
		}
	})
	return total
}

// Has reports whether family name has a metric whose labels have the
// values given.
func (m Metrics) Has(name string, labelValues ...string) bool {
	var found bool
	m.each(name, labelValues, func(*dto.Metric) { found = true })
	return found
}

// CountOf returns the sum of the sample counts of the histograms of
// family name whose labels have the values given.
func (m Metrics) CountOf(name string, labelValues ...string) uint64 {
	var total uint64
	m.each(name, labelValues, func(x *dto.Metric) {
		if x.Histogram != nil {
			total += x.Histogram.GetSampleCount()
		}
	})
	return total
}

// Labeled returns the values (as Value sums them) of the metrics of
// family name whose labels have the values given, by their value of
// label by.
func (m Metrics) Labeled(name, by string, labelValues ...string) map[string]float64 {
	var out = make(map[string]float64)
	m.each(name, labelValues, func(x *dto.Metric) {
		for _, l := range x.Label {
			if l.GetName() == by {
				out[l.GetValue()] += Metrics{name: {Metric: []*dto.Metric{x}}}.Value(name)
			}
		}
	})
	return out
}

func (m Metrics) each(name string, labelValues []string, fn func(*dto.Metric)) {
	var fam, ok = m[name]
	if !ok {
		return
	}
next:
	for _, x := range fam.Metric {
		for i := 0; i+1 < len(labelValues); i += 2 {
			var matched bool
			for _, l := range x.Label {
				if l.GetName() == labelValues[i] && l.GetValue() == labelValues[i+1] {
					matched = true
				}
			}
			if !matched {
				continue next
			}
		}
		fn(x)
	}
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
