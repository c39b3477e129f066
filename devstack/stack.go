// Package devstack runs a complete Gazette stack inside the calling process:
// an embedded etcd server and one or more Gazette brokers, on loopback, with
// journal fragments persisted to a local file:// store.
//
// It serves tests, `make demo` and `gazconsumer dev`, and suits a
// single-machine deployment. Everything the stack keeps (etcd's data,
// persisted fragments and its append log) lives under Options.Dir, so
// starting a new Stack on the same directory finds the journal specs and data
// that the last one left.
//
// Its brokers all live in one process, so replication cannot keep what they
// acknowledged through a crash of that process: a broker acknowledges an
// append only once its content is in the stack's append log (Dir/appendlog,
// synced to disk unless Options.UnsafeNoFsync; readers see content only
// then too), and the next Start appends again, at the same offsets, whatever
// the persisted fragments lack. That includes an append logged just before
// the crash but never acknowledged: its writer may send it again, and the
// journal then holds it twice, as with any Gazette append whose
// acknowledgement was lost (see appendlog.go). The stack never acknowledges
// an append that it did not write.
//
// Gazette's broker package keeps process-wide state (the fragment persister,
// the file:// store root and the gRPC dispatcher), so a process runs at most
// one Stack at a time.
package devstack

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devcerts"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/fragstores"
	"github.com/gazconsumer/gazconsumer/internal/logrusslog"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker"
	"go.gazette.dev/core/broker/client"
	"go.gazette.dev/core/broker/fragment"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/broker/stores/fs"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/server"
	"go.gazette.dev/core/task"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// DefaultEtcdPrefix is the etcd prefix under which brokers keep their state,
// the default of Gazette's `gazette serve`.
const DefaultEtcdPrefix = "/gazette/cluster"

// FragmentStore is the fragment store URL to name in journal specs applied to
// a Stack: it is rooted at Options.Dir/fragments.
const FragmentStore = pb.FragmentStore("file:///")

// Options configure a Stack.
type Options struct {
	// Dir holds the stack's etcd data (Dir/etcd) and persisted journal
	// fragments (Dir/fragments). It is created if missing. Required.
	Dir string
	// Brokers is the number of brokers to run; zero means one.
	Brokers int
	// Zone of the brokers; empty means "local".
	Zone string
	// EtcdPrefix of broker state; empty means DefaultEtcdPrefix.
	EtcdPrefix string
	// EtcdPort and BrokerPort fix the loopback ports of etcd's client
	// endpoint and of the first broker (the others take the ports after it).
	// Zero picks free ephemeral ports.
	EtcdPort, BrokerPort int
	// LeaseTTL of the brokers' etcd leases; zero means 10s.
	LeaseTTL time.Duration
	// JournalLimit is the most journals one broker serves; zero means 1024.
	JournalLimit uint32
	// UnsafeNoFsync disables the fsyncs of etcd and of the append log:
	// faster tests; acknowledged appends still survive a crash of the
	// process (the page cache outlives it), not one of the machine.
	UnsafeNoFsync bool
	// LogLevel of Gazette's and etcd's own logs, routed to slog.Default().
	// The zero value is slog.LevelInfo; tests usually want slog.LevelWarn.
	LogLevel slog.Level
	// TLS serves etcd and the brokers over mutual TLS, with a CA and
	// certificates the stack makes under Dir/tls (the CA is kept, so its
	// certificates stay valid across restarts): see Stack.TLS.
	TLS bool
	// AuthKeys, if set, are Gazette's authorization keys (whitespace- or
	// comma-separated, base64): brokers refuse requests not signed by them,
	// those of their HTTP gateway included (an Authorization: Bearer token,
	// unlike `gazette serve`'s gateway, which signs them itself), and the
	// stack's own clients sign with the first.
	AuthKeys string
}

// TLSFiles are the TLS material of a Stack started with Options.TLS: the
// CA's certificate, and a certificate (with its key) that the CA signed for
// 127.0.0.1 and localhost, good for serving and as a client certificate.
type TLSFiles struct {
	CAFile            string
	CertFile, KeyFile string
}

// Stack is a running etcd server and its Gazette brokers.
type Stack struct {
	opts Options
	// holdsFileRoot tells that the stack pointed the process's file://
	// fragment stores at its directory (pointFileRoot).
	holdsFileRoot bool

	etcd       *embed.Etcd
	etcdClient *clientv3.Client
	brokers    []*Broker

	mu     sync.Mutex
	closed map[*Broker]bool // Brokers that have stopped.

	persister   *fragment.Persister
	persisterKS *keyspace.KeySpace // Where the persister looks up journal specs.
	tasks       *task.Group        // The persister and its KeySpace watch.

	conn     *grpc.ClientConn
	journals pb.RoutedJournalClient

	tlsFiles           TLSFiles    // Set if opts.TLS.
	serverTLS, peerTLS *tls.Config // Of etcd's and the brokers' servers, and their peers.
	clientTLS          *tls.Config // Of the stack's own clients.
	authorizer         pb.Authorizer
	verifier           pb.Verifier

	appends     *appendLog  // Of acknowledged appends (see appendlog.go).
	replaying   atomic.Bool // Appends of others wait while the last run's are replayed.
	replayToken string      // Metadata value of the stack's own appends during replay.
	losses      []string    // What the last run lost, if anything (see Losses).
	stopPrune   context.CancelFunc
	pruneDone   chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// active guards the process-wide state of Gazette's broker package.
var active struct {
	sync.Mutex
	running bool
}

// Start brings up embedded etcd and opts.Brokers brokers on loopback, and
// returns once every broker has announced itself and the stack's journal
// client is connected. On error, everything started so far is shut down.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: Options.Dir is required")
	}
	if opts.Brokers <= 0 {
		opts.Brokers = 1
	}
	if opts.Zone == "" {
		opts.Zone = "local"
	}
	if opts.EtcdPrefix == "" {
		opts.EtcdPrefix = DefaultEtcdPrefix
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 10 * time.Second
	}
	if opts.JournalLimit == 0 {
		opts.JournalLimit = 1024
	}
	var err error
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, fmt.Errorf("devstack: resolving directory: %w", err)
	}

	active.Lock()
	if active.running {
		active.Unlock()
		return nil, errors.New("devstack: another Stack is already running in this process")
	}
	active.running = true
	active.Unlock()

	var s = &Stack{opts: opts, closed: make(map[*Broker]bool)}
	if err = s.security(); err != nil {
		active.Lock()
		active.running = false
		active.Unlock()
		return nil, err
	}
	if err = s.start(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// security makes the TLS material and authorization of the options.
func (s *Stack) security() error {
	var a = auth.NewNoopAuth()
	s.authorizer, s.verifier = a, a
	if s.opts.AuthKeys != "" {
		var k, err = auth.NewKeyedAuth(s.opts.AuthKeys)
		if err != nil {
			return fmt.Errorf("devstack: Options.AuthKeys: %w", err)
		}
		s.authorizer, s.verifier = k, k
	}
	if !s.opts.TLS {
		return nil
	}
	var dir = filepath.Join(s.opts.Dir, "tls")
	var ca, err = devcerts.LoadOrNewCA(dir, "devstack")
	if err != nil {
		return err
	}
	pair, err := ca.Issue(dir, "devstack", "127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	s.tlsFiles = TLSFiles{CAFile: ca.CertFile, CertFile: pair.CertFile, KeyFile: pair.KeyFile}
	// The one certificate serves, and is presented by every client: the
	// CA makes client certificates required.
	if s.serverTLS, err = server.BuildTLSConfig(pair.CertFile, pair.KeyFile, ca.CertFile); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	if s.peerTLS, err = server.BuildTLSConfig(pair.CertFile, pair.KeyFile, ca.CertFile); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	if s.clientTLS, err = server.BuildTLSConfig(pair.CertFile, pair.KeyFile, ca.CertFile); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	return nil
}

func (s *Stack) start(ctx context.Context) error {
	logrusslog.Install(s.opts.LogLevel)
	registerProcessGlobals(s.opts.Zone)

	var fragments = s.FragmentsRoot()
	if err := os.MkdirAll(fragments, 0o750); err != nil {
		return fmt.Errorf("devstack: creating fragment store root: %w", err)
	}
	if err := pointFileRoot(fragments); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	s.holdsFileRoot = true

	if err := s.startEtcd(ctx); err != nil {
		return err
	}
	// The appends of the last run that its fragments may lack, replayed
	// once the brokers are up: until then, only the stack's own appends are
	// served.
	var logDir = filepath.Join(s.opts.Dir, "appendlog")
	var earlier, err = appendLogSegments(logDir)
	if err != nil {
		return err
	}
	if s.appends, err = openAppendLog(logDir, !s.opts.UnsafeNoFsync); err != nil {
		return err
	}
	s.replayToken = strconv.FormatInt(time.Now().UnixNano(), 36)
	s.replaying.Store(true)
	if err := s.revokeStaleMembers(ctx); err != nil {
		return err
	}

	// One persister serves every broker of the process (Gazette's broker
	// package holds it globally). It watches its own KeySpace, so that it
	// keeps working as individual brokers come and go.
	var ks = broker.NewKeySpace(s.opts.EtcdPrefix)
	if err := ks.Load(ctx, s.etcdClient, 0); err != nil {
		return fmt.Errorf("devstack: loading broker keyspace: %w", err)
	}
	ks.WatchApplyDelay = 0
	s.persisterKS = ks
	s.persister = fragment.NewPersister(ks)
	broker.SetSharedPersister(s.persister)

	s.tasks = task.NewGroup(context.Background())
	s.tasks.Queue("persister.Serve", func() error {
		s.persister.Serve()
		return nil
	})
	s.tasks.Queue("persister.KeySpace.Watch", func() error {
		if err := ks.Watch(s.tasks.Context(), s.etcdClient); err != nil && s.tasks.Context().Err() == nil {
			return fmt.Errorf("watching broker keyspace: %w", err)
		}
		return nil
	})
	s.tasks.GoRun()

	for i := 0; i < s.opts.Brokers; i++ {
		var port = 0
		if s.opts.BrokerPort != 0 {
			port = s.opts.BrokerPort + i
		}
		var b, err = startBroker(ctx, s, i, port)
		if err != nil {
			return err
		}
		s.brokers = append(s.brokers, b)
	}

	if s.journals, s.conn, err = brokerconn.DialSecure(s.brokers[0].Endpoint(), pb.NoopDispatchRouter{},
		brokerconn.Security{TLS: s.clientTLS, Auth: s.authorizer}); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	if err = s.resetHeads(ctx); err != nil {
		return err
	}
	if err = s.replayAppends(ctx, earlier); err != nil {
		return err
	}
	if err = s.accountForContent(ctx); err != nil {
		return err
	}
	s.replaying.Store(false)

	var pruneCtx context.Context
	pruneCtx, s.stopPrune = context.WithCancel(context.Background())
	s.pruneDone = make(chan struct{})
	go func() {
		defer close(s.pruneDone)
		var ticker = time.NewTicker(appendLogPruneInterval)
		defer ticker.Stop()
		for {
			select {
			case <-pruneCtx.Done():
				return
			case <-ticker.C:
			}
			if err := s.appends.prune(pruneCtx, s.persistedEnd); err != nil && pruneCtx.Err() == nil {
				slog.Warn("devstack: pruning the append log (will retry)", "err", err)
			}
		}
	}()
	return nil
}

// resetHeads moves the append offset of every journal to the end of its
// persisted fragments. Gazette brokers refuse appends to a journal whose
// fragment index ends past the offset its live replicas agree on, since a
// lost replica might have held more; an operator clears that with
// `gazctl journals reset-head`. Here every replica of the previous run lived
// and died in this process, and its fragments are all the data there is, so
// the stack clears it itself on start.
func (s *Stack) resetHeads(ctx context.Context) error {
	var list, err = client.ListAllJournals(ctx, s.journals, pb.ListRequest{})
	if err != nil {
		return fmt.Errorf("devstack: listing journals: %w", err)
	}
	for _, j := range list.Journals {
		if j.Spec.Suspend.GetLevel() == pb.JournalSpec_Suspend_FULL {
			continue
		}
		if int(j.Spec.Replication) > len(s.brokers) {
			slog.Warn("journal wants more replicas than the stack has brokers: it cannot take appends",
				"journal", j.Spec.Name, "replication", j.Spec.Replication, "brokers", len(s.brokers))
			continue
		}
		if err = s.resetHead(ctx, j.Spec.Name); err != nil {
			return err
		}
	}
	return nil
}

var registerOnce sync.Once

// registerProcessGlobals installs Gazette's gRPC dispatcher and the
// providers of every fragment store Gazette supports (file:// rooted at the
// stack's fragments, s3:// and the others as brokers register them), once
// per process.
func registerProcessGlobals(zone string) {
	registerOnce.Do(func() {
		pb.RegisterGRPCDispatcher(zone)
		fragstores.Register("")
	})
}

// chooseEtcdPort returns a loopback port that is free now (tests replace it).
var chooseEtcdPort = func() (int, error) {
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// maxEtcdBindAttempts bounds the ports startEtcd tries when it chooses them.
const maxEtcdBindAttempts = 5

func (s *Stack) startEtcd(ctx context.Context) error {
	var cfg = embed.NewConfig()
	cfg.Name = "devstack"
	cfg.Dir = filepath.Join(s.opts.Dir, "etcd")
	cfg.UnsafeNoFsync = s.opts.UnsafeNoFsync
	cfg.LogLevel = zapLevel(s.opts.LogLevel)
	// etcd logs expected errors when it shuts down: keep its logs for debugging.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if s.opts.LogLevel <= slog.LevelDebug {
		if zl, err := zap.NewDevelopment(); err == nil {
			cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
		}
	}

	// etcd advertises its client URL to its clients, which sync their
	// endpoints to it: it must name the port, not 0. A port chosen here is
	// free when chosen but may be taken by another process before etcd binds
	// it, so a bind that fails on a chosen port is tried again on another.
	var e *embed.Etcd
	for attempt := 1; ; attempt++ {
		var port = s.opts.EtcdPort
		if port == 0 {
			var err error
			if port, err = chooseEtcdPort(); err != nil {
				return fmt.Errorf("devstack: choosing etcd's port: %w", err)
			}
		}
		var scheme = "http"
		if s.opts.TLS {
			scheme = "https"
			cfg.ClientTLSInfo = transport.TLSInfo{
				CertFile: s.tlsFiles.CertFile, KeyFile: s.tlsFiles.KeyFile,
				TrustedCAFile: s.tlsFiles.CAFile, ClientCertAuth: true,
			}
		}
		var client = url.URL{Scheme: scheme, Host: "127.0.0.1:" + strconv.Itoa(port)}
		var peer = url.URL{Scheme: "http", Host: "127.0.0.1:0"}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

		var err error
		if e, err = embed.StartEtcd(cfg); err == nil {
			break
		} else if s.opts.EtcdPort != 0 || !errors.Is(err, syscall.EADDRINUSE) || attempt == maxEtcdBindAttempts {
			return fmt.Errorf("devstack: starting etcd in %s: %w", cfg.Dir, err)
		}
		slog.Debug("etcd's chosen port was taken before it bound it; choosing another", "port", port, "err", err)
	}
	s.etcd = e

	var err error
	select {
	case <-e.Server.ReadyNotify():
	case err = <-e.Err():
		return fmt.Errorf("devstack: etcd failed to start: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("devstack: waiting for etcd: %w", ctx.Err())
	}

	s.etcdClient, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{s.EtcdURL()},
		TLS:         s.clientTLS,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("devstack: dialing etcd: %w", err)
	}
	return nil
}

// revokeStaleMembers revokes the leases of broker announcements that a
// previous run on the same directory left behind (after a crash, they would
// live on until their lease expired and block brokers of the same name).
// The embedded etcd belongs to this stack, so every broker member under its
// prefix is one of ours.
func (s *Stack) revokeStaleMembers(ctx context.Context) error {
	var resp, err = s.etcdClient.Get(ctx, s.opts.EtcdPrefix+allocator.MembersPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("devstack: listing stale broker members: %w", err)
	}
	for _, kv := range resp.Kvs {
		if kv.Lease == 0 {
			continue
		}
		if _, err = s.etcdClient.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
			return fmt.Errorf("devstack: revoking lease of stale broker %s: %w", kv.Key, err)
		}
		slog.Info("revoked lease of a stale broker member", "key", string(kv.Key))
	}
	return nil
}

// resetHead resets the head of one journal, retrying while the allocator
// has yet to assign the journal its replicas. It first appends nothing: an
// append waits for its broker's first listing of the journal's fragment
// store (a read doesn't: until that listing lands, a read of the head tells
// of the brokers' spools alone, at 0 after a restart), and is refused if
// the listing ends past the spools. Then, the listing landed, the head read
// is the listing's end, and an append of nothing at that offset moves the
// brokers' spools there.
func (s *Stack) resetHead(ctx context.Context, journal pb.Journal) error {
	for {
		var err = client.NewAppender(s.ownAppends(ctx), s.journals, pb.AppendRequest{Journal: journal}).Close()
		if err == nil {
			return nil // The spools are at the listing's end.
		} else if errors.Is(err, client.ErrIndexHasGreaterOffset) {
			var head pb.Offset
			if head, err = s.writeHead(ctx, journal); err != nil {
				return err
			}
			err = client.NewAppender(s.ownAppends(ctx), s.journals, pb.AppendRequest{Journal: journal, Offset: head}).Close()
			if err == nil {
				return nil
			}
		}
		// (A wrong offset: the listing moved on since the head was read.)
		if !errors.Is(err, client.ErrInsufficientJournalBrokers) && !errors.Is(err, client.ErrNoJournalPrimaryBroker) &&
			!errors.Is(err, client.ErrNotJournalPrimaryBroker) && !errors.Is(err, client.ErrWrongAppendOffset) {
			return fmt.Errorf("devstack: resetting the head of journal %s: %w", journal, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: resetting the head of journal %s: %w (last: %w)", journal, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// appendLogPruneInterval is how often the stack removes segments of its
// append log that the fragment store has caught up with.
const appendLogPruneInterval = 10 * time.Second

// replayMetadataKey marks the stack's own appends while it replays.
const replayMetadataKey = "gazconsumer-devstack-replay"

// ownAppends marks ctx as the stack's own: its appends are served while
// the stack replays the last run's.
func (s *Stack) ownAppends(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, replayMetadataKey, s.replayToken)
}

// admitAppend refuses the appends of others while the stack replays.
func (s *Stack) admitAppend(ctx context.Context) error {
	if !s.replaying.Load() {
		return nil
	}
	if md, _ := metadata.FromIncomingContext(ctx); slices.Contains(md.Get(replayMetadataKey), s.replayToken) {
		return nil
	}
	return status.Error(codes.Unavailable, "devstack: replaying the appends that the last run acknowledged but did not persist; retry")
}

// Losses describes what the last run of the stack on its directory
// acknowledged but lost (its process died, and its append log could not
// restore everything): each entry names a journal and the offsets lost.
// It is empty when nothing was lost, as it is unless the log itself was
// damaged.
func (s *Stack) Losses() []string { return slices.Clone(s.losses) }

// persistedEnd returns the offset through which the fragment store holds
// all of journal's content (see persistedPrefixEnd), or
// client.ErrJournalNotFound if journal was deleted: the append log then keeps
// nothing of it. (client.ListAllFragments tells a missing journal only by
// its error's text.)
func (s *Stack) persistedEnd(ctx context.Context, journal pb.Journal) (pb.Offset, error) {
	var req = pb.FragmentsRequest{Journal: journal}
	var routed = pb.WithDispatchItemRoute(ctx, s.journals, journal.String(), false)
	var fragments []pb.FragmentsResponse__Fragment
	for {
		var resp, err = s.journals.ListFragments(routed, &req)
		if err != nil {
			return 0, fmt.Errorf("listing the fragments of %s: %w", journal, err)
		} else if resp.Status == pb.Status_JOURNAL_NOT_FOUND {
			return 0, client.ErrJournalNotFound
		} else if resp.Status != pb.Status_OK {
			return 0, fmt.Errorf("listing the fragments of %s: %s", journal, resp.Status)
		}
		fragments = append(fragments, resp.Fragments...)
		if req.NextPageToken = resp.NextPageToken; req.NextPageToken == 0 {
			return persistedPrefixEnd(fragments), nil
		}
	}
}

// persistedPrefixEnd returns the end of the content that persisted
// fragments hold without a gap, from the journal's first fragment on (the
// content before it was deleted). A fragment persisted past a gap (the
// persister writes completed fragments in no set order, and retries those
// it failed to) does not count: the appends of the gap are in the append
// log only.
func persistedPrefixEnd(fragments []pb.FragmentsResponse__Fragment) pb.Offset {
	if len(fragments) == 0 {
		return 0
	}
	var specs = make([]pb.Fragment, 0, len(fragments))
	for _, f := range fragments {
		specs = append(specs, f.Spec)
	}
	slices.SortFunc(specs, func(a, b pb.Fragment) int { return cmp.Compare(a.Begin, b.Begin) })
	var end = specs[0].Begin
	for _, f := range specs {
		if f.Begin > end {
			break // A gap: no persisted fragment holds [end, f.Begin).
		} else if f.BackingStore != "" {
			end = max(end, f.End)
		}
	}
	return end
}

// maxReplayAttempts bounds the appends of one record of the append log
// which the brokers refuse as behind their index of persisted fragments.
const maxReplayAttempts = 10

// replayAppends appends again, at their very offsets, the appends that the
// segments of the last run's append log hold and the fragment store lacks,
// then removes those segments. A journal whose logged appends do not join
// up with its persisted content is reported in Losses.
func (s *Stack) replayAppends(ctx context.Context, segs []segmentFile) error {
	if len(segs) == 0 {
		return nil
	}
	var heads = make(map[pb.Journal]pb.Offset)
	var gone = make(map[pb.Journal]bool)
	var replayed = make(map[pb.Journal]int64)
	var lost = make(map[pb.Journal][]string)
	for _, seg := range segs {
		var err = readAppendSegment(seg.path, func(rec appendRecord) error {
			if gone[rec.Journal] {
				return nil
			}
			var head, ok = heads[rec.Journal]
			if !ok {
				var err error
				if head, err = s.writeHead(ctx, rec.Journal); errors.Is(err, client.ErrJournalNotFound) {
					gone[rec.Journal] = true
					return nil
				} else if err != nil {
					return err
				}
				s.appends.setLogged(rec.Journal, head, true) // Persisted.
			}
			for attempt := 1; rec.End > head && rec.Begin == head; attempt++ {
				var _, err = client.Append(s.ownAppends(ctx), s.journals,
					pb.AppendRequest{Journal: rec.Journal, Offset: rec.Begin}, bytes.NewReader(rec.Content))
				if errors.Is(err, client.ErrIndexHasGreaterOffset) && attempt < maxReplayAttempts {
					// Since the head was read, the brokers' index of the
					// journal's persisted fragments caught up with those the
					// last run persisted (resetHeads waited for its primary's
					// first listing; another broker's, if the journal moved,
					// may land later): move the head to its end, and place
					// the append again.
					if err = s.resetHead(ctx, rec.Journal); err == nil {
						head, err = s.writeHead(ctx, rec.Journal)
					}
					if err != nil {
						return err
					}
					s.appends.setLogged(rec.Journal, head, true)
					continue
				} else if err != nil {
					return fmt.Errorf("devstack: replaying the append of journal %s at offset %d: %w", rec.Journal, rec.Begin, err)
				}
				head = rec.End
				replayed[rec.Journal] += rec.End - rec.Begin
			}
			switch {
			case rec.End <= head:
				// Persisted, or replayed.
			default:
				lost[rec.Journal] = append(lost[rec.Journal], fmt.Sprintf("[%d, %d)", head, rec.Begin))
				head = rec.Begin // What follows cannot be placed either.
				gone[rec.Journal] = true
			}
			heads[rec.Journal] = head
			return nil
		})
		if err != nil {
			return err
		}
	}
	for journal, n := range replayed {
		slog.Warn("devstack: the last run stopped before persisting appends it had acknowledged: appended them again",
			"journal", journal, "bytes", n, "through", heads[journal])
	}
	for journal, ranges := range lost {
		var msg = fmt.Sprintf("journal %s: the last run acknowledged content beyond offset %s that its append log cannot place (a gap of unacknowledged content before it); the journal continues from its persisted end",
			journal, strings.Join(ranges, ", "))
		slog.Error("devstack: " + msg)
		s.losses = append(s.losses, msg)
	}
	for _, seg := range segs {
		if err := os.Remove(seg.path); err != nil {
			return fmt.Errorf("devstack: removing a replayed append log segment: %w", err)
		}
	}
	s.appends.mu.Lock()
	s.appends.closed = slices.DeleteFunc(s.appends.closed, func(c closedSegment) bool { return c.ends == nil })
	s.appends.mu.Unlock()
	return nil
}

// accountForContent tells the append log, of each journal, through which
// offset its content is accounted for as the stack starts (persisted, or
// replayed): reads of it never wait for the log; reads past it wait for
// the appends that log it. A journal whose head cannot be had (it has more
// replicas than the stack has brokers) is read without waiting.
func (s *Stack) accountForContent(ctx context.Context) error {
	var list, err = client.ListAllJournals(s.ownAppends(ctx), s.journals, pb.ListRequest{})
	if err != nil {
		return fmt.Errorf("devstack: listing journals: %w", err)
	}
	for _, j := range list.Journals {
		if j.Spec.Suspend.GetLevel() == pb.JournalSpec_Suspend_FULL || int(j.Spec.Replication) > len(s.brokers) {
			s.appends.setLogged(j.Spec.Name, 0, false)
			continue
		}
		var head, err = s.writeHead(ctx, j.Spec.Name)
		if err != nil {
			return err
		}
		s.appends.setLogged(j.Spec.Name, head, true)
	}
	return nil
}

// writeHead returns the write head of journal, as its brokers agree on it.
func (s *Stack) writeHead(ctx context.Context, journal pb.Journal) (pb.Offset, error) {
	for {
		var r = client.NewReader(s.ownAppends(ctx), s.journals, pb.ReadRequest{
			Journal: journal, Offset: -1, Block: false, MetadataOnly: true,
		})
		var _, err = r.Read(nil)
		if errors.Is(err, client.ErrOffsetNotYetAvailable) {
			return r.Response.Offset, nil
		} else if !errors.Is(err, client.ErrInsufficientJournalBrokers) && !errors.Is(err, client.ErrNoJournalPrimaryBroker) &&
			!errors.Is(err, client.ErrNotJournalPrimaryBroker) {
			return 0, fmt.Errorf("devstack: write head of journal %s: %w", journal, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("devstack: write head of journal %s: %w (last: %w)", journal, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Etcd is a client of the stack's etcd server.
func (s *Stack) Etcd() *clientv3.Client { return s.etcdClient }

// EtcdEndpoint is the URL of the etcd server's client endpoint.
func (s *Stack) EtcdEndpoint() string { return s.etcd.Clients[0].Addr().String() }

// EtcdURL is EtcdEndpoint with its scheme (https with Options.TLS), as
// Gazette's ETCD_ADDRESS takes it.
func (s *Stack) EtcdURL() string {
	if s.opts.TLS {
		return "https://" + s.EtcdEndpoint()
	}
	return "http://" + s.EtcdEndpoint()
}

// TLS returns the stack's TLS material, and whether it serves TLS.
func (s *Stack) TLS() (TLSFiles, bool) { return s.tlsFiles, s.opts.TLS }

// AuthKeys are the stack's Options.AuthKeys.
func (s *Stack) AuthKeys() string { return s.opts.AuthKeys }

// EtcdPrefix is the etcd prefix of broker state.
func (s *Stack) EtcdPrefix() string { return s.opts.EtcdPrefix }

// Journals is a journal client connected to the first broker. Brokers proxy
// requests for journals that they do not serve.
func (s *Stack) Journals() pb.RoutedJournalClient { return s.journals }

// Brokers of the stack, in start order. A closed broker stays in the list.
func (s *Stack) Brokers() []*Broker { return s.brokers }

// Dir is the stack's absolute data directory.
func (s *Stack) Dir() string { return s.opts.Dir }

// FragmentsRoot is the root directory of the stack's file:// fragment
// store. Clients which read fragments directly (ReadRequest.DoNotProxy)
// open the URLs brokers sign under it: see client.InstallFileTransport.
func (s *Stack) FragmentsRoot() string { return filepath.Join(s.opts.Dir, "fragments") }

// Close stops the brokers (handing off or persisting their journals), then
// the persister, then etcd. It returns once every goroutine of the stack has
// exited. It is safe to call more than once.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		if s.holdsFileRoot {
			defer releaseFileRoot()
		}
		// Stop every broker at once, without handoff: there is nowhere to
		// hand journals to. Their replicas complete their fragments, which
		// the persister then writes to the fragment store.
		var errs = make([]error, len(s.brokers))
		var wg sync.WaitGroup
		for i, b := range s.brokers {
			wg.Go(func() { errs[i] = b.stop(false) })
		}
		wg.Wait()
		if s.conn != nil {
			errs = append(errs, s.conn.Close())
		}
		if s.tasks != nil {
			// Persist what brokers completed while exiting, then stop. The
			// persister drops fragments of journals it cannot find, so it
			// must first see every spec applied so far.
			errs = append(errs, s.syncPersisterKeySpace())
			s.persister.Finish()
			s.tasks.Cancel()
			errs = append(errs, s.tasks.Wait())
			broker.SetSharedPersister(nil)
		}
		if s.etcdClient != nil {
			errs = append(errs, s.etcdClient.Close())
		}
		if s.etcd != nil {
			s.etcd.Close()
			<-s.etcd.Server.StopNotify()
		}
		if s.stopPrune != nil {
			s.stopPrune()
			<-s.pruneDone
		}
		if s.appends != nil {
			// Once the persister has written every fragment, the log holds
			// nothing the fragment store lacks.
			var persisted = errors.Join(errs...) == nil && s.persister != nil
			errs = append(errs, s.appends.close(persisted))
		}
		s.closeErr = errors.Join(errs...)

		active.Lock()
		active.running = false
		active.Unlock()
	})
	return s.closeErr
}

// syncPersisterKeySpace waits until the persister's KeySpace reflects the
// last write under the stack's etcd prefix. It waits for that write's
// revision, not etcd's current one: the KeySpace watches only the prefix,
// and writes elsewhere (a consumer's shards, say) never reach it.
func (s *Stack) syncPersisterKeySpace() error {
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var resp, err = s.etcdClient.Get(ctx, s.opts.EtcdPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return fmt.Errorf("devstack: reading the last revision of %s before persisting fragments: %w", s.opts.EtcdPrefix, err)
	} else if len(resp.Kvs) == 0 {
		return nil
	}
	if err = s.persisterSees(ctx, resp.Kvs[0].ModRevision); err != nil {
		return fmt.Errorf("devstack: waiting for the persister to see revision %d: %w", resp.Kvs[0].ModRevision, err)
	}
	return nil
}

// persisterSees waits until the persister's KeySpace is at revision rev or
// later.
func (s *Stack) persisterSees(ctx context.Context, rev int64) error {
	s.persisterKS.Mu.RLock()
	defer s.persisterKS.Mu.RUnlock()
	return s.persisterKS.WaitForRevision(ctx, rev)
}

// lastLive reports whether b is the only broker of the stack still running.
func (s *Stack) lastLive(b *Broker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.brokers {
		if o != b && !s.closed[o] {
			return false
		}
	}
	return true
}

func (s *Stack) markClosed(b *Broker) {
	s.mu.Lock()
	s.closed[b] = true
	s.mu.Unlock()
}

func zapLevel(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	default:
		return "debug"
	}
}

// DialJournals returns a journal client of the broker at ep, dialed with
// Gazette's dispatcher balancer so that RPCs carrying a route go straight to
// the route's members, and the connection to close when done.
func DialJournals(ep pb.Endpoint) (pb.RoutedJournalClient, *grpc.ClientConn, error) {
	var jc, conn, err = brokerconn.Dial(ep, pb.NoopDispatchRouter{})
	if err != nil {
		return nil, nil, fmt.Errorf("devstack: %w", err)
	}
	return jc, conn, nil
}

// waitForMember blocks until the member key appears in ks.
func waitForMember(ctx context.Context, ks *keyspace.KeySpace, key string) error {
	ks.Mu.RLock()
	defer ks.Mu.RUnlock()
	for {
		if _, ok := ks.Search(key); ok {
			return nil
		}
		if err := ks.WaitForRevision(ctx, ks.Header.Revision+1); err != nil {
			return err
		}
	}
}

// fileRoot is the root of the file:// fragment stores of the process's
// brokers (Gazette's fs.FileSystemStoreRoot): a symbolic link, set once,
// which each stack started points at its fragments directory. The variable
// never changes after the first stack starts, so that the refreshes of the
// brokers of stacks already closed, which may still read it, never race a
// later stack's start; the link is replaced atomically.
var fileRoot struct {
	once sync.Once
	mu   sync.Mutex
	link string
	err  error
	held int // Stacks started and not closed: the last to close removes the link.
}

// pointFileRoot points the file:// fragment stores of the process at dir.
func pointFileRoot(dir string) error {
	fileRoot.once.Do(func() {
		var base, err = os.MkdirTemp("", "gazconsumer-devstack-root-")
		if err != nil {
			fileRoot.err = fmt.Errorf("creating the root of file:// fragment stores: %w", err)
			return
		}
		fileRoot.link = filepath.Join(base, "fragments")
		fs.FileSystemStoreRoot = fileRoot.link
	})
	if fileRoot.err != nil {
		return fileRoot.err
	}
	fileRoot.mu.Lock()
	defer fileRoot.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(fileRoot.link), 0o700); err != nil {
		return fmt.Errorf("pointing file:// fragment stores at %s: %w", dir, err)
	}
	var next = fileRoot.link + ".next"
	if err := os.Remove(next); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pointing file:// fragment stores at %s: %w", dir, err)
	}
	if err := os.Symlink(dir, next); err != nil {
		return fmt.Errorf("pointing file:// fragment stores at %s: %w", dir, err)
	} else if err = os.Rename(next, fileRoot.link); err != nil {
		return fmt.Errorf("pointing file:// fragment stores at %s: %w", dir, err)
	}
	fileRoot.held++
	return nil
}

// releaseFileRoot is called by each stack that pointed the file:// fragment
// stores, once closed: the last removes the link and its directory (the
// stores of brokers closed then find no fragments, and write none).
func releaseFileRoot() {
	fileRoot.mu.Lock()
	defer fileRoot.mu.Unlock()
	if fileRoot.held--; fileRoot.held == 0 {
		if err := os.RemoveAll(filepath.Dir(fileRoot.link)); err != nil {
			slog.Warn("removing the root of file:// fragment stores", "dir", filepath.Dir(fileRoot.link), "err", err)
		}
	}
}
