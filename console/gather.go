package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/runtime"
)

// Reading is what the console gathered of every consumer group at one
// moment: the groups' members and shards, each shard's replicas, sources
// and counters, and what could not be read, as errors to show.
type Reading struct {
	// At is when the reading was taken.
	At time.Time
	// Groups are the consumer groups, by name.
	Groups []*Group
	// Errors are failures of the reading as a whole (etcd unreachable).
	Errors []string
}

// Group is a consumer group: the shards, members and assignments under
// one etcd prefix.
type Group struct {
	// Name is the last element of Prefix (a consumer's name, as
	// runconsumer's default prefix /gazette/consumers/<name> has it).
	Name, Prefix string
	Members      []*Member
	// Shards, failed first, then by ID.
	Shards []*Shard
	// Errors are what could not be read of the group: a member down, the
	// Shard API refusing the console's token.
	Errors []string
	// Lag is the sum of the shards' lags, in bytes.
	Lag int64
	// MsgRate and TxnRate sum the shards' rates, in messages and
	// transactions a second; negative if unknown (a first reading).
	MsgRate, TxnRate float64
}

// Rescale describes a rescale of the group in progress, or is empty: its
// shards labeled by `gazconsumer rescale`, and those still dropping what
// they no longer own once it ended.
func (g *Group) Rescale() string {
	var to string
	var newShards, serving int
	var dropping []string
	for _, s := range g.Shards {
		if v := s.Spec.LabelSet.ValueOf(runtime.LabelSplitTo); v != "" {
			to = v
		}
		if s.Spec.LabelSet.ValueOf(runtime.LabelSplitFrom) != "" {
			newShards++
			if s.Status == StatusPrimary {
				serving++
			}
		}
		// Dropping, or about to (its labels removed, it drops from its next
		// transaction).
		if s.RescalePhase == runtime.RescaleDropping || s.RescalePhase == runtime.RescaleSplit &&
			s.Spec.LabelSet.ValueOf(runtime.LabelSplitTo) == "" && s.Spec.LabelSet.ValueOf(runtime.LabelSplitFrom) == "" {
			dropping = append(dropping, s.ID)
		}
	}
	switch {
	case to != "":
		return fmt.Sprintf("Rescaling to %s partitions: %d of %d new shards primary.", to, serving, newShards)
	case newShards != 0:
		return fmt.Sprintf("Rescaling: %d of %d new shards primary.", serving, newShards)
	case len(dropping) != 0:
		return fmt.Sprintf("Rescale ended: %s still dropping the rows they no longer own.", strings.Join(dropping, ", "))
	}
	return ""
}

// StatusCounts are the numbers of the group's shards of each status, in
// the order of statusOrder.
func (g *Group) StatusCounts() []StatusCount {
	var counts = make(map[string]int)
	for _, s := range g.Shards {
		counts[s.Status]++
	}
	var out []StatusCount
	for _, st := range statusOrder {
		if counts[st] != 0 {
			out = append(out, StatusCount{st, counts[st]})
		}
	}
	return out
}

// Shard returns the group's shard id, or nil.
func (g *Group) Shard(id string) *Shard {
	for _, s := range g.Shards {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// StatusCount is a number of shards of a status.
type StatusCount struct {
	Status string
	Count  int
}

// The statuses of a shard, in the order shown: the worst first.
const (
	StatusFailed     = "FAILED"
	StatusUnknown    = "UNKNOWN"
	StatusUnassigned = "UNASSIGNED"
	StatusRecovering = "RECOVERING"
	StatusPrimary    = "PRIMARY"
)

var statusOrder = []string{StatusFailed, StatusUnknown, StatusUnassigned, StatusRecovering, StatusPrimary}

// Member is a member of a consumer group, as its ConsumerSpec in etcd
// announces it, and what it serves.
type Member struct {
	ID       string
	Zone     string
	Endpoint pb.Endpoint
	// ShardLimit is the most shards the member takes.
	ShardLimit uint32
	// Primaries and Replicas are the numbers of shards it is the primary
	// of, and holds a replica of.
	Primaries, Replicas int
	// Err is why its metrics could not be read (it is down, say).
	Err string

	metrics progress.Metrics
}

// Shard is a shard of a consumer group.
type Shard struct {
	ID    string
	Group string
	// Status summarizes the shard (see the Status constants).
	Status string
	// Primary is the member ID of its primary, if assigned.
	Primary  string
	Replicas []*Replica
	Sources  []*Source
	// Lag is the bytes of its sources its primary has yet to read:
	// -1 if unknown.
	Lag int64
	// Counters of its primary's process (its metrics): messages,
	// transactions and bytes committed, failures of its replicas, and
	// the count and summed seconds of its transactions.
	Messages, Transactions, Bytes, Failures float64
	TxnCount                                uint64
	TxnSeconds                              float64
	// Phases are the seconds its transactions spent in each phase.
	Phases []Phase
	// MsgRate and TxnRate are messages and transactions a second since the
	// previous reading; negative if unknown.
	MsgRate, TxnRate float64
	// Errors are the errors of its failed replicas, and Err what could not
	// be read of it.
	Errors []string
	Err    string
	// Spec is the shard's spec.
	Spec *pc.ShardSpec
	// RescalePhase is the phase of a rescale its primary's state is in
	// (runtime.RescaleSplit or RescaleDropping, from its metrics), or
	// empty; RescaleDropped counts the rows it dropped so far, while
	// dropping, and RescaleThrough is the share of its state it has gone
	// through, or -1 if its store can't tell.
	RescalePhase   string
	RescaleDropped int64
	RescaleThrough float64

	primaryEndpoint pb.Endpoint
}

// Rescale describes where the shard stands in a rescale, from the labels
// of its spec (`gazconsumer rescale` sets) and its primary's metrics, or
// is empty.
func (s *Shard) Rescale() string {
	var to, from = s.Spec.LabelSet.ValueOf(runtime.LabelSplitTo), s.Spec.LabelSet.ValueOf(runtime.LabelSplitFrom)
	switch {
	case from != "" && s.RescalePhase == runtime.RescaleSplit:
		return "new, forked from " + from + "; keeps its parent's other rows, hidden, until the rescale ends"
	case from != "" && s.Status == StatusPrimary:
		return "new, forked from " + from // Its own rows, copied.
	case from != "":
		return "new, forking from " + from
	case s.RescalePhase == runtime.RescaleSplit && to != "":
		return "split to " + to + " partitions; keeps the rows of its new shards, hidden, until the rescale ends"
	case s.RescalePhase == runtime.RescaleSplit:
		return "rescale ended; drops the rows it no longer owns from its next transaction"
	case to != "":
		return "to split to " + to + " partitions at its next transaction"
	case s.RescalePhase == runtime.RescaleDropping:
		if s.RescaleThrough < 0 {
			return fmt.Sprintf("rescale ended; dropping the rows it no longer owns (%d so far)", s.RescaleDropped)
		}
		return fmt.Sprintf("rescale ended; dropping the rows it no longer owns (%d so far, %.0f%% of its state gone through)",
			s.RescaleDropped, 100*s.RescaleThrough)
	}
	return ""
}

// MeanTxn is the mean duration of its primary's transactions, or 0.
func (s *Shard) MeanTxn() time.Duration {
	if s.TxnCount == 0 {
		return 0
	}
	return time.Duration(s.TxnSeconds / float64(s.TxnCount) * float64(time.Second))
}

// Phase is the time transactions spent in one phase.
type Phase struct {
	Name    string
	Seconds float64
	// Share of the time of all phases, in percent.
	Share float64
}

// Replica is an assignment of a shard to a member.
type Replica struct {
	Member   string
	Endpoint pb.Endpoint
	// Primary is set for the replica in the primary's slot.
	Primary bool
	// Code is its ReplicaStatus code, and Errors its errors if FAILED.
	Code   string
	Errors []string
	// Played and Remaining are the bytes of the recovery log the replica
	// has played and has yet to play (its member's metrics), -1 if
	// unknown; PlayRate is bytes played a second since the previous
	// reading, negative if unknown.
	Played, Remaining int64
	PlayRate          float64
}

// Recovering reports whether the replica is playing its recovery log.
func (r *Replica) Recovering() bool { return r.Played >= 0 && r.Remaining > 0 }

// Progress is the share of its recovery log's span the replica has
// played, in percent.
func (r *Replica) Progress() float64 {
	if r.Played < 0 || r.Played+r.Remaining == 0 {
		return 0
	}
	return 100 * float64(r.Played) / float64(r.Played+r.Remaining)
}

// ETA is when the replica will have played its recovery log at its rate,
// or 0 if unknown.
func (r *Replica) ETA() time.Duration {
	if r.PlayRate <= 0 || r.Remaining <= 0 {
		return 0
	}
	return time.Duration(float64(r.Remaining) / r.PlayRate * float64(time.Second)).Round(time.Second)
}

// Source is a journal a shard reads.
type Source struct {
	Journal pb.Journal
	// ReadThrough is the offset the primary has committed its reads
	// through, WriteHead the journal's, and Lag the difference; -1 if
	// unknown.
	ReadThrough, WriteHead, Lag int64
}

// gatherer reads consumer groups from etcd, the brokers and the members.
type gatherer struct {
	etcd     *clientv3.Client
	journals pb.RoutedJournalClient
	members  *progress.Members
	root     string // Of the groups.
	group    string // If set, the only group.
	timeout  time.Duration
}

// groups returns the prefixes of the consumer groups under g.root: those
// with shard specs or members.
func (g *gatherer) groups(ctx context.Context) ([]string, error) {
	if g.group != "" {
		return []string{strings.TrimSuffix(g.group, "/")}, nil
	}
	var resp, err = g.etcd.Get(ctx, g.root, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("listing the consumer groups under %s in etcd: %w", g.root, err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		var key = string(kv.Key)
		for _, sep := range []string{allocator.ItemsPrefix, allocator.MembersPrefix} {
			if i := strings.Index(key, sep); i > 0 {
				if p := key[:i]; !slices.Contains(out, p) {
					out = append(out, p)
				}
				break
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// read takes a Reading of every group.
func (g *gatherer) read(ctx context.Context) *Reading {
	var ctx2, cancel = context.WithTimeout(ctx, g.timeout)
	defer cancel()
	var r = &Reading{At: time.Now()}
	var prefixes, err = g.groups(ctx2)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	r.Groups = make([]*Group, len(prefixes))
	var wg sync.WaitGroup
	for i, p := range prefixes {
		wg.Go(func() { r.Groups[i] = g.readGroup(ctx2, p) })
	}
	wg.Wait()
	return r
}

// readGroup reads the group under prefix: its members from etcd, its
// shards through the Shard API of a member (List, then Stat of each
// primary), the write heads of their sources from the brokers, and the
// counters of each member's metrics.
func (g *gatherer) readGroup(ctx context.Context, prefix string) *Group {
	var grp = &Group{Name: prefix[strings.LastIndex(prefix, "/")+1:], Prefix: prefix, MsgRate: -1, TxnRate: -1}
	var err error
	if grp.Members, err = g.readMembers(ctx, prefix); err != nil {
		grp.Errors = append(grp.Errors, err.Error())
	}

	// Members' metrics, concurrently with the Shard API.
	var wg sync.WaitGroup
	for _, m := range grp.Members {
		wg.Go(func() {
			var metrics, err = g.members.Metrics(ctx, m.Endpoint)
			if err != nil {
				m.Err = err.Error()
			}
			m.metrics = metrics
		})
	}
	var list *pc.ListResponse
	if list, err = g.list(ctx, grp.Members); err != nil {
		grp.Errors = append(grp.Errors, err.Error())
		// Show the shards' specs at least.
		var specs, err2 = g.readSpecs(ctx, prefix)
		if err2 != nil {
			grp.Errors = append(grp.Errors, err2.Error())
		}
		for _, spec := range specs {
			var status = StatusUnknown
			if len(grp.Members) == 0 {
				status = StatusUnassigned
			}
			grp.Shards = append(grp.Shards, &Shard{ID: spec.Id.String(), Group: grp.Name, Status: status, Lag: -1, Spec: spec, MsgRate: -1, TxnRate: -1})
		}
		wg.Wait()
		sortShards(grp.Shards)
		return grp
	}
	for i := range list.Shards {
		var sh = newShard(grp.Name, &list.Shards[i])
		grp.Shards = append(grp.Shards, sh)
		wg.Go(func() { g.readProgress(ctx, sh) })
	}
	wg.Wait()

	var byEndpoint = make(map[pb.Endpoint]*Member)
	for _, m := range grp.Members {
		byEndpoint[m.Endpoint] = m
	}
	for _, sh := range grp.Shards {
		for _, rep := range sh.Replicas {
			var m = byEndpoint[rep.Endpoint]
			if m == nil {
				continue
			}
			m.Replicas++
			if rep.Primary && rep.Code == pc.ReplicaStatus_PRIMARY.String() {
				m.Primaries++
			}
			if m.metrics != nil && m.metrics.Has(progress.RecoveryPlayed, "shard", sh.ID) {
				rep.Played = int64(m.metrics.Value(progress.RecoveryPlayed, "shard", sh.ID))
				rep.Remaining = int64(m.metrics.Value(progress.RecoveryRemaining, "shard", sh.ID))
			}
		}
		if m := byEndpoint[sh.primaryEndpoint]; m != nil && m.metrics != nil {
			sh.readCounters(m.metrics)
		}
		if sh.Lag > 0 {
			grp.Lag += sh.Lag
		}
	}
	sortShards(grp.Shards)
	return grp
}

// newShard is the Shard of a List response's shard.
func newShard(group string, ls *pc.ListResponse_Shard) *Shard {
	var spec = ls.Spec
	var sh = &Shard{ID: spec.Id.String(), Group: group, Spec: &spec, Lag: -1, MsgRate: -1, TxnRate: -1}
	for i, st := range ls.Status {
		var rep = &Replica{Member: ls.Route.Members[i].Suffix, Primary: int32(i) == ls.Route.Primary, Code: st.Code.String(), Errors: st.Errors, Played: -1, Remaining: -1, PlayRate: -1}
		if i < len(ls.Route.Endpoints) {
			rep.Endpoint = ls.Route.Endpoints[i]
		}
		sh.Replicas = append(sh.Replicas, rep)
		if st.Code == pc.ReplicaStatus_FAILED {
			sh.Errors = append(sh.Errors, st.Errors...)
		}
	}
	switch {
	case len(sh.Errors) != 0 || slices.ContainsFunc(ls.Status, func(st pc.ReplicaStatus) bool { return st.Code == pc.ReplicaStatus_FAILED }):
		sh.Status = StatusFailed
	case len(ls.Status) == 0:
		sh.Status = StatusUnassigned
	case ls.Route.Primary == -1:
		sh.Status = StatusRecovering // Replicas, but none in the primary's slot yet.
	case ls.Status[ls.Route.Primary].Code == pc.ReplicaStatus_PRIMARY:
		sh.Status = StatusPrimary
	default:
		sh.Status = StatusRecovering
	}
	if ls.Route.Primary != -1 {
		sh.Primary = ls.Route.Members[ls.Route.Primary].Suffix
		if int(ls.Route.Primary) < len(ls.Route.Endpoints) {
			sh.primaryEndpoint = ls.Route.Endpoints[ls.Route.Primary]
		}
	}
	for _, src := range spec.Sources {
		sh.Sources = append(sh.Sources, &Source{Journal: src.Journal, ReadThrough: -1, WriteHead: -1, Lag: -1})
	}
	return sh
}

// readProgress reads the write heads of the shard's sources, then how far
// its primary has read them (Stat), as progress.Follower does: a primary
// caught up with those heads has read all that was committed before.
func (g *gatherer) readProgress(ctx context.Context, sh *Shard) {
	var heads = make(map[pb.Journal]pb.Offset)
	for _, src := range sh.Sources {
		var head, err = progress.WriteHead(ctx, g.journals, src.Journal)
		if err != nil {
			sh.Err = err.Error()
			continue
		}
		heads[src.Journal], src.WriteHead = head, head
	}
	if sh.Status != StatusPrimary || sh.primaryEndpoint == "" {
		return
	}
	// A primary still recovering makes Stat wait: don't.
	var statCtx, cancel = context.WithTimeout(ctx, time.Second)
	defer cancel()
	var stat, err = g.members.Stat(statCtx, sh.primaryEndpoint, pc.ShardID(sh.ID))
	switch {
	case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		sh.Err = fmt.Sprintf("its primary, member %s, did not answer Stat within a second (still recovering?)", sh.Primary)
		return
	case err != nil:
		sh.Err = err.Error()
		return
	case stat.Status != pc.Status_OK:
		sh.Err = fmt.Sprintf("Stat of member %s: %s", sh.Primary, stat.Status)
		return
	}
	var lag int64
	var known = true
	for _, src := range sh.Sources {
		src.ReadThrough = int64(stat.ReadThrough[src.Journal])
		if head, ok := heads[src.Journal]; ok {
			src.Lag = max(0, int64(head)-src.ReadThrough)
			lag += src.Lag
		} else {
			known = false
		}
	}
	if known {
		sh.Lag = lag
	}
}

// readCounters sets the shard's counters from its primary's metrics.
func (sh *Shard) readCounters(m progress.Metrics) {
	sh.Messages = m.Value(progress.MessagesTotal, "shard", sh.ID)
	sh.Transactions = m.Value(progress.TransactionsTotal, "shard", sh.ID)
	sh.Bytes = m.Value(progress.BytesTotal, "shard", sh.ID)
	sh.Failures = m.Value(progress.FailuresTotal, "shard", sh.ID)
	sh.TxnCount = m.CountOf(progress.TxnSeconds, "shard", sh.ID)
	sh.TxnSeconds = m.Value(progress.TxnSeconds, "shard", sh.ID)
	for phase, v := range m.Labeled(progress.RescalePhase, "phase", "shard", sh.ID) {
		if v == 1 {
			sh.RescalePhase = phase
		}
	}
	sh.RescaleDropped = int64(m.Value(progress.RescaleDropped, "shard", sh.ID))
	sh.RescaleThrough = -1
	if m.Has(progress.RescaleThrough, "shard", sh.ID) {
		sh.RescaleThrough = m.Value(progress.RescaleThrough, "shard", sh.ID)
	}
	var phases = m.Labeled(progress.PhaseSeconds, "phase", "shard", sh.ID)
	var total float64
	for _, s := range phases {
		total += s
	}
	for _, name := range []string{"consume", "stalled", "finalize", "commit", "ack"} {
		if s, ok := phases[name]; ok {
			var p = Phase{Name: name, Seconds: s}
			if total > 0 {
				p.Share = 100 * s / total
			}
			sh.Phases = append(sh.Phases, p)
		}
	}
}

// list lists the group's shards through the Shard API of the first of
// members that answers.
func (g *gatherer) list(ctx context.Context, members []*Member) (*pc.ListResponse, error) {
	if len(members) == 0 {
		return nil, errors.New("no member of the group is running: its shards are not assigned")
	}
	var errs []error
	for _, m := range members {
		var sc, err = g.members.Shards(m.Endpoint)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var listCtx, cancel = context.WithTimeout(ctx, 2*time.Second)
		resp, err := sc.List(listCtx, &pc.ListRequest{})
		cancel()
		if err == nil && resp.Status != pc.Status_OK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("listing the shards through member %s (%s): %w", m.ID, m.Endpoint, err))
	}
	return nil, errors.Join(errs...)
}

// readMembers reads the ConsumerSpecs of the group's members from etcd.
func (g *gatherer) readMembers(ctx context.Context, prefix string) ([]*Member, error) {
	var key = prefix + allocator.MembersPrefix
	var resp, err = g.etcd.Get(ctx, key, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading the members under %s in etcd: %w", key, err)
	}
	var out []*Member
	for _, kv := range resp.Kvs {
		var spec pc.ConsumerSpec
		if err = spec.Unmarshal(kv.Value); err != nil {
			return out, fmt.Errorf("decoding the member at %s: %w", kv.Key, err)
		}
		out = append(out, &Member{ID: spec.Id.Suffix, Zone: spec.Id.Zone, Endpoint: spec.Endpoint, ShardLimit: spec.ShardLimit})
	}
	slices.SortFunc(out, func(a, b *Member) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// readSpecs reads the group's shard specs from etcd.
func (g *gatherer) readSpecs(ctx context.Context, prefix string) ([]*pc.ShardSpec, error) {
	var key = prefix + allocator.ItemsPrefix
	var resp, err = g.etcd.Get(ctx, key, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading the shard specs under %s in etcd: %w", key, err)
	}
	var out []*pc.ShardSpec
	for _, kv := range resp.Kvs {
		var spec = new(pc.ShardSpec)
		if err = spec.Unmarshal(kv.Value); err != nil {
			return out, fmt.Errorf("decoding the shard spec at %s: %w", kv.Key, err)
		}
		out = append(out, spec)
	}
	return out, nil
}

// sortShards orders shards by status, the worst first, then by ID.
func sortShards(shards []*Shard) {
	slices.SortFunc(shards, func(a, b *Shard) int {
		return cmp.Or(cmp.Compare(slices.Index(statusOrder, a.Status), slices.Index(statusOrder, b.Status)), strings.Compare(a.ID, b.ID))
	})
}
