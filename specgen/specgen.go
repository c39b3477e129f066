// Package specgen writes the Gazette journal and shard specifications that
// the gazconsumer annotations of .proto files describe, in the YAML formats
// `gazctl journals apply` and `gazctl shards apply` take.
//
// A journal message whose `journal` option has a `family` gets its partition
// journals, labelled with its message type and the content type of its
// framing exactly as the generated NewMessage expects them. A consumer
// whose option has `shards` gets one shard per partition of the families it
// consumes, and a recovery-log journal per shard. The output is sorted and
// hierarchical (as `gazctl journals list --format yaml` prints it), so that
// files regenerated after a change of annotations differ only where the
// specs do. Invalid annotations are errors positioned at
// file.proto:line:col.
package specgen

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gazconsumer/gazconsumer/internal/protopos"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"go.gazette.dev/core/broker/journalspace"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/consumer/shardspace"
	"go.gazette.dev/core/labels"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"gopkg.in/yaml.v2"
)

// Defaults of the annotations' fields left zero.
const (
	// DefaultPartitions is the number of partitions of a journal family.
	DefaultPartitions = 1
	// MaxPartitions is the largest number of partitions of a journal family.
	MaxPartitions = 10000
	// DefaultReplication is the replication of journals and recovery logs.
	DefaultReplication = 3
	// DefaultFragmentLength is the target length of a fragment, in bytes.
	DefaultFragmentLength = 1 << 29
	// DefaultRefreshInterval is how often brokers list the fragment stores.
	DefaultRefreshInterval = 5 * time.Minute
	// DefaultHintPrefix prefixes a recovery_log_prefix to make the default
	// hint_prefix of a consumer's shards.
	DefaultHintPrefix = "/gazette/hints/"
	// DefaultHintBackups is the number of earlier generations of hints kept.
	DefaultHintBackups = 2
	// DefaultMaxTxnDuration is the max_txn_duration of shards of a consumer
	// whose shard_defaults have none.
	DefaultMaxTxnDuration = time.Second
	// JournalsFile is the name of the generated journal specs.
	JournalsFile = "journals.yaml"
)

// Options configure Generate.
type Options struct {
	// Command is the command that generates the files, named in their
	// header comment.
	Command string
	// Upsert gives each journal and shard revision -1, with which gazctl
	// creates it or updates it, whichever it needs, where it otherwise
	// refuses to create one that exists: for specs applied again and again,
	// e.g. by a deployment's Job.
	Upsert bool
}

// File is a generated spec file.
type File struct {
	// Name is the file's name: JournalsFile, or NAME-shards.yaml for the
	// shards of consumer service NAME (lower-cased).
	Name string
	// Content is the file's YAML, with a header comment.
	Content []byte
}

// Generate returns the spec files of the annotated journal messages and
// consumers of files: JournalsFile with the journals of the message
// families and the consumers' recovery logs, if there are any, then the
// shards of each consumer, by file name. Consumers may consume messages of
// any file, which files import.
func Generate(files []protoreflect.FileDescriptor, opts Options) ([]File, error) {
	var g, consumers, err = build(files)
	if err != nil {
		return nil, err
	}
	return g.files(consumers, opts)
}

// Specs are the specs that the annotations of files describe.
type Specs struct {
	// Families of journal messages, by message type (the full name of the
	// message).
	Families map[string]Family
	// Consumers by full name of their service.
	Consumers map[string]Consumer
}

// Family is the partition journals of a journal message.
type Family struct {
	// Journals are the specs of its partitions, in order.
	Journals []pb.JournalSpec
}

// Consumer is the shards of a consumer service.
type Consumer struct {
	// Families are the message types of the families it reads, in the
	// order of their journals' names.
	Families []string
	// Shards are the specs of its shards, in order; Logs, of their recovery
	// logs, in the same order.
	Shards []pc.ShardSpec
	Logs   []pb.JournalSpec
}

// Build returns the specs that the annotations of files describe, as
// Generate writes them.
func Build(files []protoreflect.FileDescriptor) (*Specs, error) {
	var g, consumers, err = build(files)
	if err != nil {
		return nil, err
	}
	var out = &Specs{Families: map[string]Family{}, Consumers: map[string]Consumer{}}
	for _, fam := range g.families {
		if fam != nil {
			out.Families[string(fam.msg.FullName())] = Family{Journals: fam.specs}
		}
	}
	for _, c := range consumers {
		var oc = Consumer{Shards: c.shards, Logs: c.logs}
		for _, fam := range c.families {
			oc.Families = append(oc.Families, string(fam.msg.FullName()))
		}
		out.Consumers[string(c.svc.FullName())] = oc
	}
	return out, nil
}

// build runs the generator over files.
func build(files []protoreflect.FileDescriptor) (*generator, []*consumer, error) {
	var g = &generator{families: map[protoreflect.FullName]*family{}, journals: map[pb.Journal]string{}}
	var consumers []*consumer
	var seen = map[string]bool{}
	for _, f := range files {
		if seen[f.Path()] {
			continue
		}
		seen[f.Path()] = true
		var err error
		walkMessages(f.Messages(), func(m protoreflect.MessageDescriptor) {
			var fam *family
			if err == nil {
				fam, err = g.family(m)
			}
			if fam != nil {
				g.generated = append(g.generated, fam)
			}
		})
		if err != nil {
			return nil, nil, err
		}
		for i := 0; i < f.Services().Len(); i++ {
			var c, err = g.consumer(f.Services().Get(i))
			if err != nil {
				return nil, nil, err
			} else if c != nil {
				consumers = append(consumers, c)
			}
		}
	}

	return g, consumers, nil
}

// files writes the spec files of g's families and consumers.
func (g *generator) files(consumers []*consumer, opts Options) ([]File, error) {
	var out []File
	var journals pb.ListResponse
	for _, fam := range g.generated {
		for _, spec := range fam.specs {
			journals.Journals = append(journals.Journals, pb.ListResponse_Journal{Spec: spec})
		}
	}
	for _, c := range consumers {
		for _, spec := range c.logs {
			journals.Journals = append(journals.Journals, pb.ListResponse_Journal{Spec: spec})
		}
		if c.deadLetters != nil {
			journals.Journals = append(journals.Journals, pb.ListResponse_Journal{Spec: *c.deadLetters})
		}
	}
	if len(journals.Journals) != 0 {
		sort.Slice(journals.Journals, func(i, j int) bool {
			return journals.Journals[i].Spec.Name < journals.Journals[j].Spec.Name
		})
		if opts.Upsert {
			for i := range journals.Journals {
				journals.Journals[i].ModRevision = -1
			}
		}
		var content, err = marshal(journalsHeader(opts.Command), journalspace.FromListResponse(&journals))
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: JournalsFile, Content: content})
	}

	sort.Slice(consumers, func(i, j int) bool { return consumers[i].file < consumers[j].file })
	for i, c := range consumers {
		if i != 0 && consumers[i-1].file == c.file {
			return nil, fmt.Errorf("%s: consumers %s and %s would both have their shards written to %s",
				position(c.svc, nil), consumers[i-1].svc.FullName(), c.svc.FullName(), c.file)
		}
		var shards pc.ListResponse
		for _, spec := range c.shards {
			var s = pc.ListResponse_Shard{Spec: spec}
			if opts.Upsert {
				s.ModRevision = -1
			}
			shards.Shards = append(shards.Shards, s)
		}
		var content, err = marshal(shardsHeader(opts.Command, c), shardspace.FromListResponse(&shards))
		if err != nil {
			return nil, err
		}
		out = append(out, File{Name: c.file, Content: content})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no journal message has a family, and no consumer has shards, to write specs of")
	}
	return out, nil
}

// family is the journal family of a journal message.
type family struct {
	msg   protoreflect.MessageDescriptor
	name  string           // Prefix of its journals' names.
	specs []pb.JournalSpec // Of its partitions, in order.
}

// consumer is the shards of a consumer service.
type consumer struct {
	svc      protoreflect.ServiceDescriptor
	file     string    // Of its shard specs.
	idPrefix string    // Of its shards' IDs.
	families []*family // It consumes, in order of name.
	shards   []pc.ShardSpec
	logs     []pb.JournalSpec
	// deadLetters is the spec of its dead-letter journal, if it has one.
	deadLetters *pb.JournalSpec
}

type generator struct {
	families  map[protoreflect.FullName]*family // Of every journal message met, nil if it has none.
	generated []*family                         // Families of the files to generate, in order.
	journals  map[pb.Journal]string             // Generated journals, by what they belong to.
}

// Source paths of the gazconsumer options, relative to the descriptor they
// annotate.
var (
	messageOptionPath  = []int32{protopos.MessageOptionsField, gcv1.E_Message.Field}
	consumerOptionPath = []int32{protopos.ServiceOptionsField, gcv1.E_Consumer.Field}
	familyPath         = append(slices.Clone(messageOptionPath), 1, 5)
	shardsPath         = append(slices.Clone(consumerOptionPath), 5)
	shardDefaultsPath  = append(slices.Clone(consumerOptionPath), 4)
)

// family returns the journal family of m, or nil if m has none, and adds it
// to the generated families if m is of a file to generate.
func (g *generator) family(m protoreflect.MessageDescriptor) (*family, error) {
	if fam, ok := g.families[m.FullName()]; ok {
		return fam, nil
	}
	var opts, _ = proto.GetExtension(m.Options(), gcv1.E_Message).(*gcv1.MessageOptions)
	var jm = opts.GetJournal()
	var fo = jm.GetFamily()
	if fo == nil {
		g.families[m.FullName()] = nil
		return nil, nil
	}
	var errorf = func(sub []int32, format string, args ...any) error {
		return fmt.Errorf("%s: journal family of %s: %s", position(m, append(slices.Clone(familyPath), sub...)),
			m.FullName(), fmt.Sprintf(format, args...))
	}

	// The labels, as the generated NewMessage expects them.
	var messageType = jm.GetMessageType()
	if messageType == "" {
		messageType = string(m.FullName())
	}
	var contentType string
	switch jm.GetFraming() {
	case gcv1.Framing_FRAMING_UNSPECIFIED, gcv1.Framing_FRAMING_PROTOBUF:
		contentType = labels.ContentType_ProtoFixed
	case gcv1.Framing_FRAMING_JSON:
		contentType = labels.ContentType_JSONLines
	default:
		return nil, fmt.Errorf("%s: unknown framing %v of %s", position(m, messageOptionPath), jm.GetFraming(), m.FullName())
	}
	var set pb.LabelSet
	set.AddValue(labels.MessageType, messageType)
	set.AddValue(labels.ContentType, contentType)

	var name = fo.GetName()
	switch {
	case name == "":
		return nil, errorf([]int32{1}, "no name: name the family's journals with a prefix ending in \"/\", e.g. \"acme/orders/\"")
	case !strings.HasSuffix(name, "/"):
		return nil, errorf([]int32{1}, "name %q must end in \"/\"", name)
	}
	var partitions = int(fo.GetPartitions())
	if partitions == 0 {
		partitions = DefaultPartitions
	} else if partitions > MaxPartitions {
		return nil, errorf([]int32{2}, "%d partitions: at most %d", partitions, MaxPartitions)
	}
	var replication = int32(fo.GetReplication())
	if replication == 0 {
		replication = DefaultReplication
	}
	var frag, err = fragment(fo.GetFragment(), pb.CompressionCodec_SNAPPY)
	if err != nil {
		return nil, errorf([]int32{4}, "fragment: %v", err)
	}

	var fam = &family{msg: m, name: name}
	for i := range partitions {
		var spec = pb.JournalSpec{
			Name:        pb.Journal(name + "part-" + index(i, partitions)),
			Replication: replication,
			LabelSet:    set,
			Fragment:    frag,
		}
		if err := spec.Validate(); err != nil {
			return nil, errorf(nil, "journal %s: %v", spec.Name, err)
		}
		fam.specs = append(fam.specs, spec)
	}
	g.families[m.FullName()] = fam
	if err := g.claim(m, familyPath, fam.specs, "a partition of journal message "+string(m.FullName())); err != nil {
		return nil, err
	}
	return fam, nil
}

// consumer returns the shards of consumer service s, or nil if it has none.
func (g *generator) consumer(s protoreflect.ServiceDescriptor) (*consumer, error) {
	var opts, _ = proto.GetExtension(s.Options(), gcv1.E_Consumer).(*gcv1.Consumer)
	var so = opts.GetShards()
	if so == nil {
		return nil, nil
	}
	var errorf = func(path []int32, format string, args ...any) error {
		return fmt.Errorf("%s: shards of consumer %s: %s", position(s, path), s.FullName(), fmt.Sprintf(format, args...))
	}
	var sub = func(field int32) []int32 { return append(slices.Clone(shardsPath), field) }

	// The families it consumes, in order of name.
	var families []*family
	for i := 0; i < s.Methods().Len(); i++ {
		var meth = s.Methods().Get(i)
		if mo, _ := proto.GetExtension(meth.Input().Options(), gcv1.E_Message).(*gcv1.MessageOptions); mo.GetTimer() != nil {
			continue // It handles the firings of a timer: no journal's.
		}
		var fam, err = g.family(meth.Input())
		if err != nil {
			return nil, err
		} else if fam == nil {
			return nil, fmt.Errorf("%s: shards of consumer %s: handler %s consumes %s, whose journal option has no family: the shards' source journals are unknown",
				position(meth, nil), s.FullName(), meth.Name(), meth.Input().FullName())
		}
		families = append(families, fam)
	}
	if len(families) == 0 {
		return nil, errorf(shardsPath, "the consumer has no handler rpcs, and so no source journals")
	}
	sort.Slice(families, func(i, j int) bool { return families[i].specs[0].Name < families[j].specs[0].Name })
	var partitions = len(families[0].specs)
	for _, fam := range families[1:] {
		if len(fam.specs) != partitions {
			return nil, errorf(shardsPath, "one shard reads each partition of the journals consumed, but %s has %d partitions and %s %d",
				families[0].msg.FullName(), partitions, fam.msg.FullName(), len(fam.specs))
		}
	}

	var idPrefix = so.GetIdPrefix()
	if idPrefix == "" {
		idPrefix = strings.ToLower(string(s.Name()))
	}
	var logPrefix = so.GetRecoveryLogPrefix()
	switch {
	case logPrefix == "":
		return nil, errorf(sub(2), "no recovery_log_prefix: name the shards' recovery logs with a prefix, e.g. \"acme/recovery/%s\"", idPrefix)
	case strings.HasSuffix(logPrefix, "/"):
		return nil, errorf(sub(2), "recovery_log_prefix %q must not end in \"/\"", logPrefix)
	}
	var hintPrefix = so.GetHintPrefix()
	if hintPrefix == "" {
		hintPrefix = DefaultHintPrefix + logPrefix
	}
	var hintBackups = int32(DefaultHintBackups)
	if so.HintBackups != nil {
		hintBackups = int32(so.GetHintBackups())
	}

	var defaults = opts.GetShardDefaults()
	var maxTxn, minTxn = DefaultMaxTxnDuration, time.Duration(0)
	for _, d := range []struct {
		name  string
		field int32
		v     *durationpb.Duration
		to    *time.Duration
	}{
		{"min_txn_duration", 1, defaults.GetMinTxnDuration(), &minTxn},
		{"max_txn_duration", 2, defaults.GetMaxTxnDuration(), &maxTxn},
	} {
		if d.v == nil {
			continue
		} else if err := d.v.CheckValid(); err != nil {
			return nil, errorf(append(slices.Clone(shardDefaultsPath), d.field), "shard_defaults.%s: %v", d.name, err)
		}
		*d.to = d.v.AsDuration()
	}

	var recoveryLogs = so.GetRecoveryLogs()
	var replication = int32(recoveryLogs.GetReplication())
	if replication == 0 {
		replication = DefaultReplication
	}
	var frag, err = fragment(recoveryLogs.GetFragment(), pb.CompressionCodec_NONE)
	if err != nil {
		return nil, errorf(append(sub(5), 2), "recovery_logs.fragment: %v", err)
	}
	var set pb.LabelSet
	set.AddValue(labels.ContentType, labels.ContentType_RecoveryLog)

	var c = &consumer{svc: s, file: strings.ToLower(string(s.Name())) + "-shards.yaml", idPrefix: idPrefix, families: families}
	if c.deadLetters, err = deadLetters(so.GetDeadLetters(), func(format string, args ...any) error {
		return errorf(sub(6), format, args...)
	}); err != nil {
		return nil, err
	}
	for i := range partitions {
		var spec = pc.ShardSpec{
			Id:                pc.ShardID(idPrefix + "-" + index(i, partitions)),
			RecoveryLogPrefix: logPrefix,
			HintPrefix:        hintPrefix,
			HintBackups:       hintBackups,
			MaxTxnDuration:    maxTxn,
			MinTxnDuration:    minTxn,
			HotStandbys:       defaults.GetHotStandbys(),
		}
		for _, fam := range families {
			spec.Sources = append(spec.Sources, pc.ShardSpec_Source{Journal: fam.specs[i].Name})
		}
		if c.deadLetters != nil {
			spec.LabelSet.AddValue(source.LabelDeadLetterJournal, c.deadLetters.Name.String())
		}
		if err := spec.Validate(); err != nil {
			return nil, errorf(shardsPath, "shard %s: %v", spec.Id, err)
		}
		var log = pb.JournalSpec{Name: spec.RecoveryLog(), Replication: replication, LabelSet: set, Fragment: frag}
		if err := log.Validate(); err != nil {
			return nil, errorf(shardsPath, "recovery log %s: %v", log.Name, err)
		}
		c.shards = append(c.shards, spec)
		c.logs = append(c.logs, log)
	}
	if err := g.claim(s, shardsPath, c.logs, "the recovery log of a shard of consumer "+string(s.FullName())); err != nil {
		return nil, err
	} else if c.deadLetters == nil {
		return c, nil
	} else if err = g.claim(s, sub(6), []pb.JournalSpec{*c.deadLetters}, "the dead-letter journal of consumer "+string(s.FullName())); err != nil {
		return nil, err
	}
	return c, nil
}

// deadLetters returns the spec of the dead-letter journal of option dl, or
// nil if it is nil. errorf positions an error at the option.
func deadLetters(dl *gcv1.DeadLetters, errorf func(format string, args ...any) error) (*pb.JournalSpec, error) {
	if dl == nil {
		return nil, nil
	} else if dl.GetJournal() == "" {
		return nil, errorf("dead_letters has no journal: name it, e.g. \"acme/dead-letters/spendcounter\"")
	}
	var replication = int32(dl.GetReplication())
	if replication == 0 {
		replication = DefaultReplication
	}
	var frag, err = fragment(dl.GetFragment(), pb.CompressionCodec_NONE)
	if err != nil {
		return nil, errorf("dead_letters.fragment: %v", err)
	}
	var spec = &pb.JournalSpec{Name: pb.Journal(dl.GetJournal()), Replication: replication, Fragment: frag}
	spec.LabelSet.AddValue(labels.ContentType, labels.ContentType_JSONLines)
	if err = spec.Validate(); err != nil {
		return nil, errorf("dead-letter journal %s: %v", spec.Name, err)
	}
	return spec, nil
}

// claim records that journals specs belong to what, declared by the option
// of d at path, and fails if one of them belongs to something else already.
func (g *generator) claim(d protoreflect.Descriptor, path []int32, specs []pb.JournalSpec, what string) error {
	for _, spec := range specs {
		if prev, ok := g.journals[spec.Name]; ok {
			return fmt.Errorf("%s: journal %s would be %s, but it is %s", position(d, path), spec.Name, what, prev)
		}
		g.journals[spec.Name] = what
	}
	return nil
}

// fragment returns the fragment settings f, defaulted, with codec as the
// default compression codec.
func fragment(f *gcv1.Fragment, codec pb.CompressionCodec) (pb.JournalSpec_Fragment, error) {
	var out = pb.JournalSpec_Fragment{
		Length:              int64(f.GetLength()),
		CompressionCodec:    codec,
		RefreshInterval:     DefaultRefreshInterval,
		PathPostfixTemplate: f.GetPathPostfixTemplate(),
	}
	if out.Length == 0 {
		out.Length = DefaultFragmentLength
	}
	if c := f.GetCompressionCodec(); c != gcv1.CompressionCodec_COMPRESSION_CODEC_UNSPECIFIED {
		if _, ok := pb.CompressionCodec_name[int32(c)]; !ok {
			return out, fmt.Errorf("unknown compression_codec %v", c)
		}
		out.CompressionCodec = pb.CompressionCodec(c)
	}
	for _, store := range f.GetStores() {
		out.Stores = append(out.Stores, pb.FragmentStore(store))
	}
	for _, d := range []struct {
		name string
		v    *durationpb.Duration
		to   *time.Duration
	}{
		{"refresh_interval", f.GetRefreshInterval(), &out.RefreshInterval},
		{"flush_interval", f.GetFlushInterval(), &out.FlushInterval},
		{"retention", f.GetRetention(), &out.Retention},
	} {
		if d.v == nil {
			continue
		} else if err := d.v.CheckValid(); err != nil {
			return out, fmt.Errorf("%s: %w", d.name, err)
		} else if d.v.AsDuration() < 0 {
			return out, fmt.Errorf("%s %v is negative", d.name, d.v.AsDuration())
		}
		*d.to = d.v.AsDuration()
	}
	if err := out.Validate(); err != nil {
		return out, err
	}
	return out, nil
}

// index formats partition or shard i of n with two digits, or as many as
// n-1 has.
func index(i, n int) string {
	var width = max(2, len(fmt.Sprint(n-1)))
	return fmt.Sprintf("%0*d", width, i)
}

// walkMessages calls fn on each message of msgs and their nested messages,
// depth first.
func walkMessages(msgs protoreflect.MessageDescriptors, fn func(protoreflect.MessageDescriptor)) {
	for i := 0; i < msgs.Len(); i++ {
		fn(msgs.Get(i))
		walkMessages(msgs.Get(i).Messages(), fn)
	}
}

// position returns file.proto:line:col of the option of d at source path
// sub (relative to d), or of the nearest enclosing element whose position is
// recorded, or d's own; or the file's path alone if its descriptor has no
// source info.
func position(d protoreflect.Descriptor, sub []int32) string {
	for n := len(sub); n > 0; n-- {
		if p, ok := protopos.Recorded(d, sub[:n]...); ok {
			return p.String()
		}
	}
	if p, ok := protopos.Declared(d); ok {
		return p.String()
	}
	return d.ParentFile().Path()
}

// marshal returns v in YAML, after header.
func marshal(header string, v any) ([]byte, error) {
	var b, err = yaml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding specs: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	buf.Write(b)
	return buf.Bytes(), nil
}

// generatedBy is the first lines of the header comment of a file.
func generatedBy(command string) string {
	return "# Code generated by gazconsumer specs. DO NOT EDIT.\n# Regenerate with: " + command + "\n#\n"
}

func journalsHeader(command string) string {
	return generatedBy(command) + comment("Journals of the annotated journal messages' families (partitions "+
		"part-NN of each) and of the consumers' shards' recovery logs, for `gazctl journals apply`.")
}

func shardsHeader(command string, c *consumer) string {
	var sources []string
	for _, fam := range c.families {
		sources = append(sources, fam.name+"part-NN")
	}
	return generatedBy(command) + comment(fmt.Sprintf(
		"Shards of consumer %s, for `gazctl shards apply` through one of its members. "+
			"Shard %s-NN reads %s, and records its store into recovery log %s/%s-NN.",
		c.svc.FullName(), c.idPrefix, strings.Join(sources, " and "), c.shards[0].RecoveryLogPrefix, c.idPrefix))
}

// comment returns text as YAML comment lines of at most 80 columns (but for
// longer words).
func comment(text string) string {
	var b strings.Builder
	var line = "#"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 80 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
	return b.String()
}
