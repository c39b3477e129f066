// Package shardapi serves Gazette's Shard API (List, Stat, Apply, Unassign
// and GetHints) for a member of a consumer group, over the member's view of
// the group's KeySpace, so that gazctl shards works against gazconsumer
// members as against Gazette's.
package shardapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pbx "go.gazette.dev/core/broker/protocol/ext"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// HintsCommand is the command that prints a shard's recovery-log hints:
// GetHints answers with it, since Gazette's hints type cannot express ours.
const HintsCommand = "gazconsumer shards hints"

// Member is the member a Server serves the Shard API of: runtime/service
// implements it.
type Member interface {
	// ID of the member.
	ID() pb.ProcessSpec_ID
	// State is the member's allocator state, over its KeySpace.
	State() *allocator.State
	// Joined is closed once the member has joined its group: its KeySpace
	// is loaded and it is announced.
	Joined() <-chan struct{}
	// Etcd is the member's etcd client.
	Etcd() *clientv3.Client
	// Journals is the member's broker client.
	Journals() pb.RoutedJournalClient
	// App is the application the member runs.
	App() runtime.Application
	// Loopback is a connection to the member's own server, which dispatches
	// calls carrying a route to the route's members (Gazette's server.Server
	// GRPCLoopback).
	Loopback() *grpc.ClientConn
	// Authorizer signs the calls the member proxies; nil signs none.
	Authorizer() pb.Authorizer
	// Replica returns the member's replica of shard id, if it has one. It
	// is called with the KeySpace read-locked.
	Replica(id pc.ShardID) (Replica, bool)
}

// Replica is a member's replica of a shard, as Stat reports it.
type Replica interface {
	// Spec of the shard, as the replica holds it.
	Spec() *pc.ShardSpec
	// AwaitServing waits until the replica serves as the shard's primary,
	// and reports whether it does: false if it stopped, or ctx ended, first.
	AwaitServing(ctx context.Context) bool
	// Progress returns the offsets the primary has read through and
	// published at, and a channel closed at their next change.
	Progress() (readThrough, publishAt pb.Offsets, changed <-chan struct{})
	// Done is closed once the replica stops.
	Done() <-chan struct{}
}

// Server serves Gazette's Shard API for a Member. Register it with
// pc.RegisterShardServer(srv, pc.NewVerifiedShardServer(server, verifier)).
type Server struct{ m Member }

// New returns the Server of member m.
func New(m Member) *Server { return &Server{m: m} }

// joined waits until the member has joined its group, and returns an
// Unavailable error if ctx ends first: its port is served from the start,
// but what it knows of shards and assignments is loaded as it joins.
func (a *Server) joined(ctx context.Context) error {
	select {
	case <-a.m.Joined():
		return nil
	case <-ctx.Done():
		return status.Errorf(codes.Unavailable, "member %s has not joined its group yet: %v", a.m.ID().Suffix, ctx.Err())
	}
}

// admit waits until the member has joined its group (see joined), and
// validates req.
func (a *Server) admit(ctx context.Context, req interface{ Validate() error }) error {
	if err := a.joined(ctx); err != nil {
		return err
	} else if err = req.Validate(); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// List the shards whose labels match the request's selector, with their
// routes and the status of each replica.
func (a *Server) List(ctx context.Context, claims pb.Claims, req *pc.ListRequest) (*pc.ListResponse, error) {
	if err := a.admit(ctx, req); err != nil {
		return nil, err
	}
	var st = a.m.State()
	st.KS.Mu.RLock()
	defer st.KS.Mu.RUnlock()

	var resp = &pc.ListResponse{Status: pc.Status_OK, Header: pbx.NewUnroutedHeader(st)}
	var labels pb.LabelSet
	var it = allocator.LeftJoin{
		LenL: len(st.Items),
		LenR: len(st.Assignments),
		Compare: func(l, r int) int {
			return strings.Compare(st.Items[l].Decoded.(allocator.Item).ID,
				st.Assignments[r].Decoded.(allocator.Assignment).ItemID)
		},
	}
	for cur, ok := it.Next(); ok; cur, ok = it.Next() {
		var item = st.Items[cur.Left]
		var shard = pc.ListResponse_Shard{
			Spec:           *item.Decoded.(allocator.Item).ItemValue.(*pc.ShardSpec),
			ModRevision:    item.Raw.ModRevision,
			CreateRevision: item.Raw.CreateRevision,
		}
		labels = shard.Spec.LabelSetExt(labels)
		if !req.Selector.Matches(labels) || !claims.Selector.Matches(labels) {
			continue
		}
		var asns = st.Assignments[cur.RightBegin:cur.RightEnd]
		pbx.Init(&shard.Route, asns)
		pbx.AttachEndpoints(&shard.Route, st.KS)
		for _, asn := range asns {
			shard.Status = append(shard.Status, *asn.Decoded.(allocator.Assignment).AssignmentValue.(*pc.ReplicaStatus))
		}
		resp.Shards = append(resp.Shards, shard)
	}
	return resp, nil
}

// Stat reports how far the shard's primary has read its sources, once it
// has read at least through the request's offsets. As Gazette's Stat: a
// shard whose labels the caller's claims do not cover is not found; a call
// reaching another member than the shard's primary is proxied to the
// primary (once: the proxied request carries a header, and its member
// answers NOT_SHARD_PRIMARY if it is not the primary either); and a
// primary still recovering the shard, or starting, is waited for, within
// the call's deadline.
func (a *Server) Stat(ctx context.Context, claims pb.Claims, req *pc.StatRequest) (*pc.StatResponse, error) {
	if err := a.admit(ctx, req); err != nil {
		return nil, err
	}
	var st = a.m.State()
	st.KS.Mu.RLock()
	if hdr := req.Header; hdr != nil && hdr.Etcd.Revision > st.KS.Header.Revision {
		if err := st.KS.WaitForRevision(ctx, hdr.Etcd.Revision); err != nil {
			st.KS.Mu.RUnlock()
			return nil, status.FromContextError(fmt.Errorf("shard %s: waiting for etcd revision %d: %w", req.Shard, hdr.Etcd.Revision, err)).Err()
		}
	}
	var resp = &pc.StatResponse{Header: pbx.NewUnroutedHeader(st)}
	var sh, local = a.m.Replica(req.Shard)
	var item, found = allocator.LookupItem(st.KS, req.Shard.String())
	if found && !claims.Selector.Matches(item.ItemValue.(*pc.ShardSpec).LabelSetExt(pb.LabelSet{})) {
		found = false // As if it did not exist, as Gazette's resolver answers.
	}
	var asns = st.KS.KeyValues.Prefixed(allocator.ItemAssignmentsPrefix(st.KS, req.Shard.String()))
	pbx.Init(&resp.Header.Route, asns)
	pbx.AttachEndpoints(&resp.Header.Route, st.KS)
	st.KS.Mu.RUnlock()

	var route = &resp.Header.Route
	switch {
	case !found:
		resp.Status = pc.Status_SHARD_NOT_FOUND
		return resp, nil
	case route.Primary == -1:
		resp.Status = pc.Status_NO_SHARD_PRIMARY
		return resp, nil
	case route.Members[route.Primary] != a.m.ID() && req.Header == nil:
		// Proxied to the primary, with the caller's claims.
		var proxied = *req
		proxied.Header = &pb.Header{ProcessId: route.Members[route.Primary], Route: *route, Etcd: resp.Header.Etcd}
		var sc = pc.NewShardClient(a.m.Loopback())
		if authorizer := a.m.Authorizer(); authorizer != nil {
			sc = pc.NewAuthShardClient(sc, authorizer)
		}
		var presp, err = sc.Stat(pb.WithDispatchRoute(ctx, *route, proxied.Header.ProcessId), &proxied)
		if err != nil {
			return nil, fmt.Errorf("shard %s: proxying to its primary, member %s: %w", req.Shard, proxied.Header.ProcessId.Suffix, err)
		}
		return presp, nil
	case route.Members[route.Primary] != a.m.ID():
		resp.Status = pc.Status_NOT_SHARD_PRIMARY
		return resp, nil
	case !local:
		resp.Status = pc.Status_SHARD_STOPPED // Being stopped by this member.
		return resp, nil
	}
	if !sh.AwaitServing(ctx) {
		if ctx.Err() != nil {
			return nil, status.FromContextError(fmt.Errorf("shard %s: its primary, member %s, is still recovering it: %w", req.Shard, a.m.ID().Suffix, ctx.Err())).Err()
		}
		resp.Status = pc.Status_SHARD_STOPPED
		return resp, nil
	}

	// Of the request's offsets, those of the shard's sources are waited
	// for, as Gazette's resolver filters them.
	var sources = sh.Spec().Sources
	for {
		var readThrough, publishAt, changed = sh.Progress()
		var caughtUp = true
		for _, src := range sources {
			caughtUp = caughtUp && readThrough[src.Journal] >= req.ReadThrough[src.Journal]
		}
		if caughtUp {
			resp.ReadThrough, resp.PublishAt, resp.Status = readThrough, publishAt, pc.Status_OK
			return resp, nil
		}
		select {
		case <-changed:
		case <-sh.Done():
			resp.Status = pc.Status_SHARD_STOPPED
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Apply creates, updates and deletes shard specs in one etcd transaction.
// Specs are completed from the application's defaults (see
// runtime.ShardDefaulter) and validated first, and the journals they read and record to must
// exist: an invalid request leaves etcd unchanged.
func (a *Server) Apply(ctx context.Context, claims pb.Claims, req *pc.ApplyRequest) (*pc.ApplyResponse, error) {
	if err := a.joined(ctx); err != nil {
		return nil, err
	}
	if d, ok := a.m.App().(runtime.ShardDefaulter); ok {
		var defaults = d.ShardDefaults()
		for _, change := range req.Changes {
			if change.Upsert != nil {
				runtime.CompleteShardSpec(change.Upsert, defaults)
			}
		}
	}
	if err := req.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	for _, change := range req.Changes {
		if change.Upsert == nil {
			continue
		} else if _, err := source.PolicyOf(change.Upsert); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		} else if _, err := source.MaxMessageSizeOf(change.Upsert); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		} else if _, err := runtime.MaxTxnOf(change.Upsert); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if err := a.verifyJournals(ctx, req); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	var st = a.m.State()
	var cmps []clientv3.Cmp
	var ops []clientv3.Op
	var labels pb.LabelSet
	for _, change := range req.Changes {
		var key string
		if change.Upsert != nil {
			labels = change.Upsert.LabelSetExt(labels)
			if !claims.Selector.Matches(labels) {
				return nil, status.Errorf(codes.PermissionDenied, "not authorized to apply shard %s", change.Upsert.Id)
			}
			key = allocator.ItemKey(st.KS, change.Upsert.Id.String())
			ops = append(ops, clientv3.OpPut(key, change.Upsert.MarshalString()))
		} else {
			if !claims.Selector.Matches(pb.MustLabelSet("id", change.Delete.String())) {
				return nil, status.Errorf(codes.PermissionDenied, "not authorized to delete shard %s", change.Delete)
			}
			key = allocator.ItemKey(st.KS, change.Delete.String())
			ops = append(ops, clientv3.OpDelete(key))
		}
		if change.ExpectModRevision != -1 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", change.ExpectModRevision))
		}
	}

	st.KS.Mu.RLock()
	var resp = &pc.ApplyResponse{Status: pc.Status_OK, Header: pbx.NewUnroutedHeader(st)}
	st.KS.Mu.RUnlock()

	var txn, err = a.m.Etcd().Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("applying shard specs: %w", err)
	}
	resp.Header.Etcd.Revision = txn.Header.Revision
	if !txn.Succeeded {
		resp.Status = pc.Status_ETCD_TRANSACTION_FAILED
		return resp, nil
	}
	// Answer once this member has observed its own write.
	st.KS.Mu.RLock()
	err = st.KS.WaitForRevision(ctx, txn.Header.Revision)
	st.KS.Mu.RUnlock()
	return resp, err
}

// verifyJournals checks that the journals named by upserted specs exist,
// and that dead-letter journals hold JSON.
func (a *Server) verifyJournals(ctx context.Context, req *pc.ApplyRequest) error {
	var names []pb.Journal
	for _, change := range req.Changes {
		if change.Upsert == nil {
			continue
		}
		for _, src := range change.Upsert.Sources {
			names = append(names, src.Journal)
		}
		if log := change.Upsert.RecoveryLog(); log != "" {
			names = append(names, log)
		}
		if p, _ := source.PolicyOf(change.Upsert); p.DeadLetters != "" {
			names = append(names, p.DeadLetters)
		}
	}
	if len(names) == 0 {
		return nil
	}
	var list, err = client.ListAllJournals(ctx, a.m.Journals(), pb.ListRequest{})
	if err != nil {
		return fmt.Errorf("listing journals: %w", err)
	}
	var specs = make(map[pb.Journal]*pb.JournalSpec, len(list.Journals))
	var exists = make(map[pb.Journal]bool, len(list.Journals))
	var contentType = make(map[pb.Journal]string, len(list.Journals))
	for i, j := range list.Journals {
		specs[j.Spec.Name] = &list.Journals[i].Spec
		exists[j.Spec.Name] = true
		contentType[j.Spec.Name] = j.Spec.LabelSet.ValueOf(labels.ContentType)
	}
	for _, change := range req.Changes {
		if change.Upsert == nil {
			continue
		}
		for _, src := range change.Upsert.Sources {
			if !exists[src.Journal] {
				return fmt.Errorf("shard %s: source journal %s does not exist", change.Upsert.Id, src.Journal)
			}
			// The consumer must read the journal's messages: its labels
			// name a message type (and framing) the consumer handles.
			if _, err := a.m.App().NewMessage(specs[src.Journal]); err != nil {
				return fmt.Errorf("shard %s: source journal %s: %w", change.Upsert.Id, src.Journal, err)
			}
		}
		if log := change.Upsert.RecoveryLog(); log != "" && !exists[log] {
			return fmt.Errorf("shard %s: recovery log %s does not exist", change.Upsert.Id, log)
		}
		if p, _ := source.PolicyOf(change.Upsert); p.DeadLetters != "" {
			if !exists[p.DeadLetters] {
				return fmt.Errorf("shard %s: dead-letter journal %s does not exist", change.Upsert.Id, p.DeadLetters)
			} else if ct := contentType[p.DeadLetters]; ct != labels.ContentType_JSONLines {
				return fmt.Errorf("shard %s: dead-letter journal %s has content-type %q, not %q",
					change.Upsert.Id, p.DeadLetters, ct, labels.ContentType_JSONLines)
			}
		}
	}
	return nil
}

// Unassign removes the failed and primary assignments of shards (only failed
// ones, if asked), so that the allocator assigns them afresh: a hot standby
// keeps its assignment and is promoted.
func (a *Server) Unassign(ctx context.Context, claims pb.Claims, req *pc.UnassignRequest) (*pc.UnassignResponse, error) {
	if err := a.admit(ctx, req); err != nil {
		return nil, err
	}
	var st = a.m.State()
	var ops []clientv3.Op
	var cmps []clientv3.Cmp
	var resp = &pc.UnassignResponse{Status: pc.Status_OK}

	st.KS.Mu.RLock()
	for _, id := range req.Shards {
		if !claims.Selector.Matches(pb.MustLabelSet("id", id.String())) {
			st.KS.Mu.RUnlock()
			return nil, status.Errorf(codes.PermissionDenied, "not authorized to unassign shard %s", id)
		}
		var asns = st.KS.KeyValues.Prefixed(allocator.ItemAssignmentsPrefix(st.KS, id.String()))
		var removed bool
		for _, asn := range asns {
			// As Gazette's: failed assignments always go, the primary's
			// unless only failed ones are asked for, and hot standbys stay,
			// so that one of them takes the shard over at once.
			var a = asn.Decoded.(allocator.Assignment)
			var code = a.AssignmentValue.(*pc.ReplicaStatus).Code
			if code != pc.ReplicaStatus_FAILED && (req.OnlyFailed || a.Slot != 0) {
				continue
			}
			ops = append(ops, clientv3.OpDelete(string(asn.Raw.Key)))
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(asn.Raw.Key)), "=", asn.Raw.ModRevision))
			removed = true
		}
		if removed {
			resp.Shards = append(resp.Shards, id)
		}
	}
	st.KS.Mu.RUnlock()

	if req.DryRun || len(ops) == 0 {
		return resp, nil
	}
	var txn, err = a.m.Etcd().Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("unassigning shards: %w", err)
	} else if !txn.Succeeded {
		resp.Status = pc.Status_ETCD_TRANSACTION_FAILED
		resp.Shards = nil
	}
	return resp, nil
}

// GetHints is not served: Gazette's hints describe its own recovery log,
// whose design differs from ours, and a translation would not be faithful.
func (a *Server) GetHints(context.Context, pb.Claims, *pc.GetHintsRequest) (*pc.GetHintsResponse, error) {
	return nil, status.Errorf(codes.Unimplemented,
		"gazconsumer's recovery-log hints differ from Gazette's: print them with `%s --shard ID`", HintsCommand)
}
