package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"github.com/gazconsumer/gazconsumer/internal/ownership"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/specgen"
)

// labelSplitNew labels the shards a rescale in progress made, until it ends.
const labelSplitNew = "gazconsumer.dev/split-new"

type rescaleFlags struct {
	clientflags.Flags
	importPaths   []string
	descriptorSet string
	consumers     []string
	partitions    int
	settle        time.Duration
	timeout       time.Duration
	handoffBatch  int
	dryRun        bool
}

func newRescaleCmd() *cobra.Command {
	var f rescaleFlags
	var cmd = &cobra.Command{
		Use:   "rescale --consumer NAME[=ETCD_PREFIX]... [flags] (PATH... | --descriptor-set FILE)",
		Short: "Grow the partitions of consumers' families, splitting their shards' state online",
		Long: `rescale grows the families a consumer reads from the partitions they have to
those the .proto files now say (family.partitions, a multiple of today's count),
while the consumer runs, applying each message exactly once:

  0. the new shards' recovery logs are created, so that the brokers serve
     them by the time the new shards start;
  1. each shard of the consumers is labeled ` + runtime.LabelSplitTo + `=M; at the end
     of its next transaction, it marks its checkpoint and from then on hides the
     rows it won't own (their partition keys map to another of the M partitions)
     from its tables and queries, keeping them, unchanged, for its new shards;
  2. the families' new journals are created (producers switch to them as
     they see them, within --settle);
  3. the new shards are created, as the .proto files say: each starts from its
     parent's committed state as of the split (read from the parent's store if
     its primary is in the same member, or else played from the parent's
     recovery log), keeps the rows it owns, serves, and reads its parent's journals
     again from the marked checkpoint (recorded in its state as inherited) through
     their heads as of --settle after it began, then its own;
  4. once every new shard is primary, the labels are removed and the shards
     split drop the rows they no longer own, --handoff-batch bytes a
     transaction (and at most a quarter of the keys and bytes the shards bound a
     transaction to: gazconsumer.dev/max-txn-writes and max-txn-bytes).

Every consumer reading one of the families grown must be rescaled with it:
give each with --consumer (its full or short name, with the etcd prefix of
its shards if not /gazette/consumers/<name in lower case>). Their tables'
rows must carry the partition key (the consumer option rescalable checks
this when generating).

Each step checks what is done already: after a crash of the command, or of
members, run it again to finish. --dry-run prints the plan only.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRescale(cmd.Context(), cmd.OutOrStdout(), f, args)
		},
	}
	var fl = cmd.Flags()
	f.Flags.Register(fl)
	fl.StringArrayVarP(&f.importPaths, "proto-path", "I", nil, "directory in which to search for imports (repeatable)")
	fl.StringVar(&f.descriptorSet, "descriptor-set", "", "read a FileDescriptorSet, with imports, rather than compile PATHs")
	fl.StringArrayVar(&f.consumers, "consumer", nil, "consumer to rescale: NAME or NAME=ETCD_PREFIX (repeatable)")
	fl.IntVar(&f.partitions, "partitions", 0, "the count of partitions the .proto files must say (a check; default: what they say)")
	fl.DurationVar(&f.settle, "settle", 5*time.Second, "time producers are given to switch to the new journals before the new shards read their parents' journals' heads (and members to see the labels, if the brokers keep their journals in another etcd)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long to wait for the new shards to serve")
	fl.IntVar(&f.handoffBatch, "handoff-batch", 0, "bytes each shard split drops in one transaction once the rescale ends (a large state's half over many; default: the members' 16 MiB)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan, change nothing")
	return cmd
}

// rescaleConsumer is a consumer being rescaled.
type rescaleConsumer struct {
	name   string // Full name of its service.
	prefix string // Etcd prefix of its shards.
	specs  specgen.Consumer
	from   int                     // Partitions before.
	to     int                     // Partitions after.
	live   map[pc.ShardID]liveSpec // Shards in etcd.
	// etcdCluster is the id of the etcd cluster of its shards.
	etcdCluster uint64

	handoffBatch int           // Bytes each shard hands off a transaction, if not the default.
	settle       time.Duration // Given producers to switch to new journals.
}

// liveSpec is a shard spec in etcd.
type liveSpec struct {
	spec        *pc.ShardSpec
	key         string
	modRevision int64
}

// rescaleFamily is a family being grown.
type rescaleFamily struct {
	name     string
	journals []pb.JournalSpec // As the .proto files say.
	live     map[pb.Journal]bool
}

func runRescale(ctx context.Context, out io.Writer, f rescaleFlags, args []string) error {
	if len(f.consumers) == 0 {
		return errors.New("--consumer is required: the consumers to rescale")
	} else if f.handoffBatch < 0 {
		return fmt.Errorf("--handoff-batch=%d: want a count of bytes", f.handoffBatch)
	}
	var files, err = loadProtos(ctx, f.importPaths, f.descriptorSet, args)
	if err != nil {
		return err
	}
	specs, err := specgen.Build(files)
	if err != nil {
		return err
	}
	consumers, families, err := rescalePlan(files, specs, f)
	if err != nil {
		return err
	}

	etcd, err := f.Etcd()
	if err != nil {
		return err
	}
	defer etcd.Close()
	jc, conn, err := f.Brokers()
	if err != nil {
		return err
	}
	defer conn.Close()

	// What exists.
	var brokersEtcd pb.Header_Etcd // Of the brokers' listings.
	for _, fam := range families {
		var sel = pb.LabelSelector{Include: pb.MustLabelSet(labels.MessageType, fam.name)}
		var list, err = client.ListAllJournals(ctx, jc, pb.ListRequest{Selector: sel})
		if err != nil {
			return fmt.Errorf("listing the journals of family %s: %w", fam.name, err)
		}
		brokersEtcd = list.Header.Etcd
		fam.live = make(map[pb.Journal]bool)
		for _, j := range list.Journals {
			fam.live[j.Spec.Name] = true
		}
	}
	for _, c := range consumers {
		if err = c.read(ctx, etcd); err != nil {
			return err
		}
		if err = c.check(families); err != nil {
			return err
		}
	}

	// The plan.
	var todo bool
	for _, c := range consumers {
		if c.from == c.to && !c.inProgress() {
			fmt.Fprintf(out, "consumer %s: %d partitions already, as the .proto files say: nothing to do\n", c.name, c.to)
			continue
		}
		todo = true
		fmt.Fprintf(out, "consumer %s (etcd %s): from %d to %d partitions\n", c.name, c.prefix, c.from, c.to)
		for i := range c.from {
			var id = c.specs.Shards[i].Id
			fmt.Fprintf(out, "  shard %s: splits its state (label %s=%d), owning index %d of %d\n", id, runtime.LabelSplitTo, c.to, i, c.to)
		}
		for q := c.from; q < c.to; q++ {
			var s = c.specs.Shards[q]
			var parent = c.live[c.specs.Shards[q%c.from].Id].spec
			fmt.Fprintf(out, "  shard %s: new, forked from %s, reads %s, and again what %s reads (%s)\n",
				s.Id, parent.Id, sourceNames(c.childSpec(q)), parent.Id, sourceNames(parent))
		}
	}
	for _, fam := range families {
		if missing := fam.missing(); len(missing) != 0 {
			fmt.Fprintf(out, "family %s: new journals %s\n", fam.name, journalNames(missing))
		}
	}
	if !todo || f.dryRun {
		return nil
	}

	// The new shards' recovery logs come first: nothing reads them until
	// the shards exist, and the brokers serve them by the time the shards
	// start (a journal just created is served once a broker is assigned
	// it: a new shard's first append would wait for that).
	var logs []pb.JournalSpec
	for _, c := range consumers {
		for q := c.from; q < c.to; q++ {
			logs = append(logs, c.specs.Logs[q])
		}
	}
	if missing, err := missingJournals(ctx, jc, logs); err != nil {
		return err
	} else if err = createJournals(ctx, jc, missing); err != nil {
		return err
	} else if created := len(missing); created != 0 {
		fmt.Fprintf(out, "created %d recovery logs\n", created)
	}
	// 1. Label the shards.
	var labels []specPut
	for _, c := range consumers {
		labels = append(labels, c.labelPuts()...)
	}
	if err = putSpecs(ctx, etcd, labels); err != nil {
		return err
	}
	if len(labels) != 0 {
		// A member that lists the new journals reads its shards' specs as of
		// the listing's revision, later than the labels', if the brokers
		// keep their journals in the members' etcd: else, it is given time.
		if cluster := consumers[0].etcdCluster; cluster == brokersEtcd.ClusterId {
			fmt.Fprintf(out, "shards labeled %s\n", runtime.LabelSplitTo)
		} else {
			fmt.Fprintf(out, "shards labeled %s; waiting %s for members to see it (the brokers keep their journals in etcd cluster %x, the members in %x)\n",
				runtime.LabelSplitTo, f.settle, brokersEtcd.ClusterId, cluster)
			if err = sleepCtx(ctx, f.settle); err != nil {
				return err
			}
		}
	}
	// 2. The families' journals.
	var create []pb.JournalSpec
	for _, fam := range families {
		create = append(create, fam.missing()...)
	}
	// Listed above: those missing then are created (if one was created
	// meanwhile, the creation fails, and a run again goes on).
	if err = createJournals(ctx, jc, create); err != nil {
		return err
	} else if created := len(create); created != 0 {
		// The new shards, created next, give producers --settle to switch
		// to them before they read their parents' journals' heads.
		fmt.Fprintf(out, "created %d journals; the new shards give producers %s to switch to them\n", created, f.settle)
	}
	// 3. The new shards.
	var children []specPut
	for _, c := range consumers {
		children = append(children, c.childPuts()...)
	}
	if err = putSpecs(ctx, etcd, children); err != nil {
		return err
	}
	fmt.Fprintf(out, "new shards created; waiting for every shard to be primary (at most %s)\n", f.timeout)
	var waitCtx, cancel = context.WithTimeout(ctx, f.timeout)
	defer cancel()
	for _, c := range consumers {
		if err = c.awaitPrimaries(waitCtx, etcd); err != nil {
			return err
		}
	}
	// 4. The end.
	for _, c := range consumers {
		if err = c.finish(ctx, etcd); err != nil {
			return err
		}
		fmt.Fprintf(out, "consumer %s: rescaled to %d partitions\n", c.name, c.to)
	}
	return nil
}

// rescalePlan resolves the consumers of f among specs, and the families
// they read, checking that no other consumer reads them and that the
// consumers' state can be split.
func rescalePlan(files []protoreflect.FileDescriptor, specs *specgen.Specs, f rescaleFlags) ([]*rescaleConsumer, []*rescaleFamily, error) {
	var names = make([]string, 0, len(specs.Consumers))
	for name := range specs.Consumers {
		names = append(names, name)
	}
	slices.Sort(names)

	var consumers []*rescaleConsumer
	var chosen = map[string]bool{}
	for _, arg := range f.consumers {
		var name, prefix, _ = strings.Cut(arg, "=")
		var full string
		for _, n := range names {
			if n == name || strings.HasSuffix(n, "."+name) {
				if full != "" {
					return nil, nil, fmt.Errorf("--consumer %s: names both %s and %s: give the full name", arg, full, n)
				}
				full = n
			}
		}
		if full == "" {
			return nil, nil, fmt.Errorf("--consumer %s: no consumer with shards of that name (have: %s)", arg, strings.Join(names, ", "))
		}
		if prefix == "" {
			prefix = "/gazette/consumers/" + strings.ToLower(full[strings.LastIndex(full, ".")+1:])
		}
		chosen[full] = true
		consumers = append(consumers, &rescaleConsumer{name: full, prefix: prefix, specs: specs.Consumers[full], handoffBatch: f.handoffBatch, settle: f.settle})
	}

	var families = map[string]*rescaleFamily{}
	for _, c := range consumers {
		if err := rescalable(files, c.name); err != nil {
			return nil, nil, err
		}
		for _, fam := range c.specs.Families {
			if families[fam] == nil {
				families[fam] = &rescaleFamily{name: fam, journals: specs.Families[fam].Journals}
			}
			c.to = len(specs.Families[fam].Journals)
			if f.partitions != 0 && f.partitions != c.to {
				return nil, nil, fmt.Errorf("--partitions %d, but the .proto files give family %s %d partitions: edit its family.partitions, then rescale",
					f.partitions, fam, c.to)
			}
		}
	}
	for _, n := range names {
		if chosen[n] {
			continue
		}
		for _, fam := range specs.Consumers[n].Families {
			if families[fam] != nil {
				return nil, nil, fmt.Errorf("consumer %s reads family %s too: rescale it in the same command (--consumer %s)", n, fam, n)
			}
		}
	}
	var out []*rescaleFamily
	for _, name := range slices.Sorted(maps.Keys(families)) {
		out = append(out, families[name])
	}
	return consumers, out, nil
}

// rescalable fails, naming a position in a .proto file, if the state of
// consumer name of files can't be split by key.
func rescalable(files []protoreflect.FileDescriptor, name string) error {
	for _, f := range files {
		var svc = f.Services().ByName(protoreflect.FullName(name).Name())
		if svc == nil || svc.FullName() != protoreflect.FullName(name) {
			continue
		}
		var c, err = ownership.Of(svc, nil)
		if err != nil {
			return err
		} else if err = c.Err(); err != nil {
			return fmt.Errorf("consumer %s can't be rescaled: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("consumer %s: its service is in none of the files", name)
}

// missing returns the specs of the family's journals yet to create.
func (fam *rescaleFamily) missing() []pb.JournalSpec {
	var out []pb.JournalSpec
	for _, j := range fam.journals {
		if !fam.live[j.Name] {
			out = append(out, j)
		}
	}
	return out
}

// read reads the consumer's shard specs from etcd, and how many partitions
// it had before the rescale: the count of its shards not made by it.
func (c *rescaleConsumer) read(ctx context.Context, etcd *clientv3.Client) error {
	var prefix = c.prefix + allocator.ItemsPrefix
	var resp, err = etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("consumer %s: reading its shard specs under %s: %w", c.name, prefix, err)
	}
	c.etcdCluster = resp.Header.ClusterId
	c.live = make(map[pc.ShardID]liveSpec)
	for _, kv := range resp.Kvs {
		var spec = new(pc.ShardSpec)
		if err = spec.Unmarshal(kv.Value); err != nil {
			return fmt.Errorf("consumer %s: decoding the shard spec at %s: %w", c.name, kv.Key, err)
		}
		c.live[spec.Id] = liveSpec{spec: spec, key: string(kv.Key), modRevision: kv.ModRevision}
		if spec.LabelSet.ValueOf(labelSplitNew) == "" {
			c.from++
		}
	}
	return nil
}

// check checks that the consumer's shards and families are as a rescale
// from c.from to c.to partitions expects.
func (c *rescaleConsumer) check(families []*rescaleFamily) error {
	switch {
	case c.from == 0:
		return fmt.Errorf("consumer %s has no shards under %s: is its etcd prefix right (--consumer %s=PREFIX)?", c.name, c.prefix, c.name)
	case c.to < c.from:
		return fmt.Errorf("consumer %s has %d shards, but its .proto families have %d partitions: shrinking is not supported", c.name, c.from, c.to)
	case c.to%c.from != 0:
		return fmt.Errorf("consumer %s: %d partitions is not a multiple of its %d shards: the partitions of a rescale must be a multiple of today's", c.name, c.to, c.from)
	}
	for i := range c.from {
		var id = c.specs.Shards[i].Id
		var live, ok = c.live[id]
		if !ok {
			return fmt.Errorf("consumer %s: shard %s is missing (its shards are not those of %d partitions of the .proto files: were shard ids renamed, or their width changed?)", c.name, id, c.from)
		} else if v := live.spec.LabelSet.ValueOf(runtime.LabelSplitTo); v != "" && v != strconv.Itoa(c.to) {
			return fmt.Errorf("consumer %s: shard %s is being rescaled to %s partitions: finish that rescale first", c.name, id, v)
		}
	}
	for _, fam := range families {
		if !slices.Contains(c.specs.Families, fam.name) {
			continue
		}
		for i, j := range fam.journals {
			if i < c.from && !fam.live[j.Name] {
				return fmt.Errorf("family %s: journal %s is missing, but consumer %s has %d shards reading partitions: the family's journals are not named as the .proto files say for %d partitions (did their width change?)",
					fam.name, j.Name, c.name, c.from, c.to)
			}
		}
		for name := range fam.live {
			if !slices.ContainsFunc(fam.journals, func(j pb.JournalSpec) bool { return j.Name == name }) {
				return fmt.Errorf("family %s has journal %s, which the .proto files do not name for %d partitions", fam.name, name, c.to)
			}
		}
	}
	return nil
}

// inProgress tells whether a shard of the consumer is labeled by a rescale.
func (c *rescaleConsumer) inProgress() bool {
	for _, l := range c.live {
		if l.spec.LabelSet.ValueOf(runtime.LabelSplitTo) != "" || l.spec.LabelSet.ValueOf(labelSplitNew) != "" {
			return true
		}
	}
	return false
}

// childSpec returns the spec of new shard q: as the .proto files say (its
// own journals: those of its parent it reads again are recorded in its
// state as it forks), with its parent's settings, labeled for its fork.
func (c *rescaleConsumer) childSpec(q int) *pc.ShardSpec {
	var spec = c.specs.Shards[q]
	var parent = c.live[c.specs.Shards[q%c.from].Id].spec
	// The parent's settings, as an operator may have changed them.
	spec.HotStandbys, spec.MinTxnDuration, spec.MaxTxnDuration = parent.HotStandbys, parent.MinTxnDuration, parent.MaxTxnDuration
	spec.Disable, spec.DisableWaitForAck, spec.RingBufferSize, spec.ReadChannelSize = parent.Disable, parent.DisableWaitForAck, parent.RingBufferSize, parent.ReadChannelSize
	spec.LabelSet = pb.LabelSet{Labels: slices.Clone(parent.LabelSet.Labels)}
	spec.LabelSet.SetValue(runtime.LabelSplitTo, strconv.Itoa(c.to))
	spec.LabelSet.SetValue(runtime.LabelSplitFrom, parent.Id.String())
	spec.LabelSet.SetValue(labelSplitNew, "true")
	spec.LabelSet.SetValue(runtime.LabelSplitSettle, c.settle.String())
	return &spec
}

func sourceNames(spec *pc.ShardSpec) string {
	var names []string
	for _, s := range spec.Sources {
		names = append(names, s.Journal.String())
	}
	return strings.Join(names, ", ")
}

// specPut is a shard spec to write at key, if the key's mod revision is
// still rev (0: if it does not exist).
type specPut struct {
	key  string
	rev  int64
	spec *pc.ShardSpec
}

// maxSpecPuts bounds the specs an etcd transaction of putSpecs writes
// (etcd's --max-txn-ops is 128 by default).
const maxSpecPuts = 64

// putSpecs writes puts, in transactions of up to maxSpecPuts of them (one,
// most often), each of which writes none of its specs if one of them
// changed meanwhile.
func putSpecs(ctx context.Context, etcd *clientv3.Client, puts []specPut) error {
	for chunk := range slices.Chunk(puts, maxSpecPuts) {
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		var ids []string
		for _, p := range chunk {
			if err := p.spec.Validate(); err != nil {
				return fmt.Errorf("shard %s: %w", p.spec.Id, err)
			}
			var b, err = p.spec.Marshal()
			if err != nil {
				return fmt.Errorf("shard %s: %w", p.spec.Id, err)
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p.key), "=", p.rev))
			ops = append(ops, clientv3.OpPut(p.key, string(b)))
			ids = append(ids, p.spec.Id.String())
		}
		var resp, err = etcd.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("shards %s: writing their specs: %w", strings.Join(ids, ", "), err)
		} else if !resp.Succeeded {
			return fmt.Errorf("shards %s: a spec changed meanwhile (or a new shard exists already): run the command again", strings.Join(ids, ", "))
		}
	}
	return nil
}

// labelPuts returns the specs of the shards the consumer had, labeled with
// the partitions to split to, of those not labeled yet.
func (c *rescaleConsumer) labelPuts() []specPut {
	var puts []specPut
	for i := range c.from {
		var live = c.live[c.specs.Shards[i].Id]
		if live.spec.LabelSet.ValueOf(runtime.LabelSplitTo) != "" {
			continue
		}
		var spec = *live.spec
		spec.LabelSet = pb.LabelSet{Labels: slices.Clone(spec.LabelSet.Labels)}
		spec.LabelSet.SetValue(runtime.LabelSplitTo, strconv.Itoa(c.to))
		if c.handoffBatch != 0 {
			spec.LabelSet.SetValue(runtime.LabelSplitBatch, strconv.Itoa(c.handoffBatch))
		}
		puts = append(puts, specPut{key: live.key, rev: live.modRevision, spec: &spec})
	}
	return puts
}

// childPuts returns the specs of the consumer's new shards which don't
// exist yet.
func (c *rescaleConsumer) childPuts() []specPut {
	var puts []specPut
	for q := c.from; q < c.to; q++ {
		var spec = c.childSpec(q)
		if _, ok := c.live[spec.Id]; !ok {
			puts = append(puts, specPut{key: c.prefix + allocator.ItemsPrefix + spec.Id.String(), spec: spec})
		}
	}
	return puts
}

// awaitPrimaries waits until every shard of the consumer has a primary
// serving it, failing if one FAILED.
func (c *rescaleConsumer) awaitPrimaries(ctx context.Context, etcd *clientv3.Client) error {
	for {
		var resp, err = etcd.Get(ctx, c.prefix+allocator.AssignmentsPrefix, clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("consumer %s: reading its assignments: %w", c.name, err)
		}
		var primary = map[string]bool{}
		for _, kv := range resp.Kvs {
			// root/assign/item-id#zone#member-suffix#slot
			var parts = strings.Split(strings.TrimPrefix(string(kv.Key), c.prefix+allocator.AssignmentsPrefix), "#")
			if len(parts) != 4 {
				continue
			}
			var status pc.ReplicaStatus
			if err = status.Unmarshal(kv.Value); err != nil {
				return fmt.Errorf("consumer %s: decoding assignment %s: %w", c.name, kv.Key, err)
			}
			switch {
			case status.Code == pc.ReplicaStatus_FAILED:
				return fmt.Errorf("consumer %s: shard %s FAILED on member %s: %s", c.name, parts[0], parts[2], strings.Join(status.Errors, "; "))
			case parts[3] == "0" && status.Code == pc.ReplicaStatus_PRIMARY:
				primary[parts[0]] = true
			}
		}
		var waiting []string
		for q := range c.to {
			if id := c.specs.Shards[q].Id.String(); !primary[id] {
				waiting = append(waiting, id)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		if err = sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return fmt.Errorf("consumer %s: shards %s are not primary yet: %w (run the command again to go on waiting)", c.name, strings.Join(waiting, ", "), err)
		}
	}
}

// finish removes the labels of the rescale from the consumer's shards: those
// split drop the rows they no longer own.
func (c *rescaleConsumer) finish(ctx context.Context, etcd *clientv3.Client) error {
	// Read again: the new shards were created since.
	if err := c.read(ctx, etcd); err != nil {
		return err
	}
	var puts []specPut
	for _, id := range slices.Sorted(maps.Keys(c.live)) {
		var live = c.live[id]
		var labels = live.spec.LabelSet
		if labels.ValueOf(runtime.LabelSplitTo) == "" && labels.ValueOf(labelSplitNew) == "" && labels.ValueOf(runtime.LabelSplitFrom) == "" &&
			labels.ValueOf(runtime.LabelSplitBatch) == "" && labels.ValueOf(runtime.LabelSplitSettle) == "" {
			continue
		}
		var spec = *live.spec
		spec.LabelSet = pb.LabelSet{Labels: slices.Clone(labels.Labels)}
		spec.LabelSet.Remove(runtime.LabelSplitTo)
		spec.LabelSet.Remove(runtime.LabelSplitFrom) // Forked: its state records what it inherited.
		spec.LabelSet.Remove(labelSplitNew)
		spec.LabelSet.Remove(runtime.LabelSplitBatch)
		spec.LabelSet.Remove(runtime.LabelSplitSettle)
		puts = append(puts, specPut{key: live.key, rev: live.modRevision, spec: &spec})
	}
	return putSpecs(ctx, etcd, puts)
}

// missingJournals returns those of specs which don't exist.
func missingJournals(ctx context.Context, jc pb.RoutedJournalClient, specs []pb.JournalSpec) ([]pb.JournalSpec, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	// One listing: a selector of several names matches each.
	var sel pb.LabelSelector
	for i := range specs {
		sel.Include.AddValue("name", specs[i].Name.String())
	}
	var list, err = client.ListAllJournals(ctx, jc, pb.ListRequest{Selector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing journals %s: %w", journalNames(specs), err)
	}
	var live = make(map[pb.Journal]bool, len(list.Journals))
	for _, j := range list.Journals {
		live[j.Spec.Name] = true
	}
	var missing []pb.JournalSpec
	for _, s := range specs {
		if !live[s.Name] {
			missing = append(missing, s)
		}
	}
	return missing, nil
}

// createJournals creates the journals of specs, which must not exist.
func createJournals(ctx context.Context, jc pb.RoutedJournalClient, specs []pb.JournalSpec) error {
	if len(specs) == 0 {
		return nil
	}
	var req pb.ApplyRequest
	for i := range specs {
		req.Changes = append(req.Changes, pb.ApplyRequest_Change{Upsert: &specs[i]})
	}
	if _, err := client.ApplyJournals(ctx, jc, &req); err != nil {
		return fmt.Errorf("creating journals %s: %w", journalNames(specs), err)
	}
	return nil
}

// journalNames joins the names of specs.
func journalNames(specs []pb.JournalSpec) string {
	var names = make([]string, len(specs))
	for i := range specs {
		names[i] = specs[i].Name.String()
	}
	return strings.Join(names, ", ")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
