// Package schemacheck finds the changes between two versions of annotated
// .proto files that break the state gazconsumer consumers keep.
//
// A table row is stored under the order-preserving encoding (package keyenc)
// of its table's name and key fields, and a journal message lands on the
// partition its partition key maps it to, framed as its annotation says.
// Protobuf's own compatibility rules (`buf breaking`) check none of that:
// rename a table, reorder, retype or reverse its key fields, or change a
// partition key, and the new code compiles, runs, and silently misses,
// misorders or misroutes everything stored before. Check compares the
// annotations of two versions and reports each such change where it is made.
//
// A table is the same table in both versions when it keeps its name (its
// effective name: the annotation's name, or else the message's full name),
// whatever message declares it. A new table name is a new table, which
// starts empty: a table whose annotation sets a new explicit name is
// reported as a Note, its old rows being unreachable by design; any other
// change of a table's name (its message or package renamed without an
// explicit name, or the name removed) is Breaking.
package schemacheck

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protopos"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// Severity tells a change that breaks stored state from one that is
// allowed but worth saying.
type Severity int

const (
	// Breaking changes make state stored under the previous version
	// unreachable, mis-ordered or mis-routed.
	Breaking Severity = iota
	// Note is an allowed change with a consequence for stored state: a table
	// given a new name, which starts empty.
	Note
)

// String returns "breaking" or "note".
func (s Severity) String() string {
	if s == Note {
		return "note"
	}
	return "breaking"
}

// Position is where a finding is: in the current version of a file, or,
// for something removed, in its previous version.
type Position struct {
	// Path is the file's path, as its descriptor names it.
	Path string
	// Line and Column are 1-based, or zero if the file has no source info.
	Line, Column int
	// Previous is set if the position is in the previous version.
	Previous bool
}

// String returns "path:line:col", or "path" if the line is unknown.
func (p Position) String() string {
	if p.Line == 0 {
		return p.Path
	}
	return fmt.Sprintf("%s:%d:%d", p.Path, p.Line, p.Column)
}

// Finding is one change between the versions.
type Finding struct {
	// Pos is the position of the new definition, or of the old one if the
	// change removes it.
	Pos Position
	// Severity tells a breaking change from a note.
	Severity Severity
	// Message says what changed and what becomes of the stored state.
	Message string
}

// String returns "path:line:col: message", with "note: " before the
// message of a Note.
func (f Finding) String() string {
	if f.Severity == Note {
		return fmt.Sprintf("%s: note: %s", f.Pos, f.Message)
	}
	return fmt.Sprintf("%s: %s", f.Pos, f.Message)
}

// Check compares the annotations of current with those of previous (each a
// set of files, with the files they import) and returns what changed in a
// way that matters to stored state, ordered by position: Breaking findings
// for changes that break it, and Notes. It reads annotations leniently:
// those that name nothing are left out of the comparison, as validating
// them is the generator's job.
func Check(previous, current []protoreflect.FileDescriptor) []Finding {
	return CheckWith(previous, current, Options{})
}

// Options change what Check reports.
type Options struct {
	// Rescaled tells that a growth of families' partitions is deployed
	// with `gazconsumer rescale`, which splits the state of the consumers
	// reading them: a growth to a multiple of the count is a Note, naming
	// the command, rather than Breaking.
	Rescaled bool
}

// CheckWith is Check, with opts.
func CheckWith(previous, current []protoreflect.FileDescriptor, opts Options) []Finding {
	c := &checker{
		opts:         opts,
		old:          load(previous),
		cur:          load(current),
		consumers:    map[*consumer]*consumer{},
		tables:       map[*table]*table{},
		tablesMapped: map[*table]bool{},
		journals:     map[*journal]*journal{},
	}
	c.matchConsumers()
	c.matchTables()
	c.matchJournals()
	for _, t := range c.old.tables {
		if n := c.tables[t]; n != nil {
			c.checkTable(t, n)
		}
	}
	for _, j := range c.old.journals {
		if n := c.journals[j]; n != nil {
			c.checkJournal(j, n)
		}
	}
	for _, o := range c.old.consumers {
		if n := c.consumers[o]; n != nil {
			c.checkConsumer(o, n)
		}
	}
	slices.SortFunc(c.findings, func(a, b Finding) int {
		if a.Pos.Previous != b.Pos.Previous {
			if a.Pos.Previous {
				return 1
			}
			return -1
		}
		return cmp.Or(strings.Compare(a.Pos.Path, b.Pos.Path), cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column), strings.Compare(a.Message, b.Message))
	})
	return c.findings
}

// checker compares two schemas: old and cur(rent).
type checker struct {
	opts     Options
	old, cur *schema
	// consumers, tables and journals map declarations of old to their
	// successors in cur.
	consumers    map[*consumer]*consumer
	tables       map[*table]*table
	tablesMapped map[*table]bool // Tables of cur that succeed one of old.
	journals     map[*journal]*journal
	findings     []Finding
}

// report adds a finding.
func (c *checker) report(pos Position, sev Severity, format string, args ...any) {
	c.findings = append(c.findings, Finding{Pos: pos, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// matchConsumers pairs consumers by full name, or else by name if exactly
// one consumer of each version has it (a consumer moved to another package).
func (c *checker) matchConsumers() {
	taken := map[*consumer]bool{}
	for _, o := range c.old.consumers {
		if n := c.cur.consumerByName[o.svc.FullName()]; n != nil {
			c.consumers[o], taken[n] = n, true
		}
	}
	byName := func(cs []*consumer, skip func(*consumer) bool) map[protoreflect.Name][]*consumer {
		out := map[protoreflect.Name][]*consumer{}
		for _, x := range cs {
			if !skip(x) {
				out[x.svc.Name()] = append(out[x.svc.Name()], x)
			}
		}
		return out
	}
	olds := byName(c.old.consumers, func(x *consumer) bool { return c.consumers[x] != nil })
	news := byName(c.cur.consumers, func(x *consumer) bool { return taken[x] })
	for _, o := range c.old.consumers {
		if from, to := olds[o.svc.Name()], news[o.svc.Name()]; c.consumers[o] == nil && len(from) == 1 && len(to) == 1 {
			c.consumers[o] = to[0]
		}
	}
}

// matchTables pairs each table of old with its successor: the table of cur
// of the same name (whose keys are the same stored keys), or else the table
// of the same message, or else, within a pair of consumers, the table of a
// message of the same name (in a package renamed).
func (c *checker) matchTables() {
	pair := func(o, n *table) {
		c.tables[o], c.tablesMapped[n] = n, true
	}
	for _, o := range c.old.tables {
		if n := c.cur.tableByName[o.name]; n != nil && !c.tablesMapped[n] && c.old.tableByName[o.name] == o {
			pair(o, n)
		}
	}
	for _, o := range c.old.tables {
		if n := c.cur.tableByMsg[o.msg.FullName()]; c.tables[o] == nil && n != nil && !c.tablesMapped[n] {
			pair(o, n)
		}
	}
	for _, oc := range c.old.consumers {
		nc := c.consumers[oc]
		if nc == nil {
			continue
		}
		for _, om := range oc.tables {
			o := c.old.tableByMsg[om.FullName()]
			if o == nil || c.tables[o] != nil {
				continue
			}
			for _, nm := range nc.tables {
				if n := c.cur.tableByMsg[nm.FullName()]; n != nil && !c.tablesMapped[n] && nm.Name() == om.Name() {
					pair(o, n)
					break
				}
			}
		}
	}
}

// matchJournals pairs each journal message of old with its successor: the
// journal message of cur of the same message type (whose journals are the
// same journals), or else of the same message, or else, within a pair of
// consumers, the input of a handler of a message of the same name (in a
// package renamed).
func (c *checker) matchJournals() {
	taken := map[*journal]bool{}
	for _, o := range c.old.journals {
		if n := c.cur.journalByType[o.messageType]; n != nil && !taken[n] && c.old.journalByType[o.messageType] == o {
			c.journals[o], taken[n] = n, true
		}
	}
	for _, o := range c.old.journals {
		if n := c.cur.journalByMsg[o.msg.FullName()]; c.journals[o] == nil && n != nil && !taken[n] {
			c.journals[o], taken[n] = n, true
		}
	}
	for _, oc := range c.old.consumers {
		nc := c.consumers[oc]
		if nc == nil {
			continue
		}
		for _, om := range oc.sources {
			o := c.old.journalByMsg[om.Input().FullName()]
			if o == nil || c.journals[o] != nil {
				continue
			}
			for _, nm := range nc.sources {
				if n := c.cur.journalByMsg[nm.Input().FullName()]; n != nil && !taken[n] && nm.Input().Name() == om.Input().Name() {
					c.journals[o], taken[n] = n, true
					break
				}
			}
		}
	}
}

// newTableHint is the escape hatch, said in each finding of a table.
func newTableHint(t *table) string {
	return fmt.Sprintf("to change it anyway, give the table a new name: a new table name is a new table, which starts empty, and the rows stored under %q are then unreachable, by design", t.name)
}

// checkTable compares table o with its successor n.
func (c *checker) checkTable(o, n *table) {
	if o.name != n.name {
		if n.explicit != "" && n.explicit != o.explicit {
			c.report(optionPosition(n.msg), Note, "%s has a new name (was %q): a new table name is a new table, which starts empty; the rows stored under %q are unreachable from now on",
				n, o.name, o.name)
			return
		}
		why := "its default name, the message's full name, changed"
		if o.explicit != "" {
			why = fmt.Sprintf("its name %q was removed, so it defaults to the message's full name", o.explicit)
		}
		c.report(optionPosition(n.msg), Breaking, "%s was named %q (%s): the rows stored under %q become unreachable and the table starts empty; set name: %q in its table option to keep them (a new table name is a new table: to start afresh on purpose, set a new name)",
			n, o.name, why, o.name, o.name)
		return
	}
	c.checkKey(o, n)
	c.checkValues(o, n)
}

// checkKey compares the key fields of table o with those of its successor n.
func (c *checker) checkKey(o, n *table) {
	d := diffKeys(o.key, n.key)
	pos := optionPosition(n.msg)
	stored := fmt.Sprintf("rows already stored are keyed by %s", keyString(o.key))
	for _, k := range d.added {
		c.report(pos, Breaking, "%s: key field %s added, making the key %s: %s, which the new key neither finds nor decodes; %s",
			n, k.name, keyString(n.key), stored, newTableHint(n))
	}
	for _, k := range d.removed {
		c.report(pos, Breaking, "%s: key field %s removed, making the key %s: %s, which the new key neither finds nor decodes, and rows differing only in %s would collide; %s",
			n, k.name, keyString(n.key), stored, k.name, newTableHint(n))
	}
	if d.reordered {
		c.report(pos, Breaking, "%s: key fields reordered, making the key %s: %s, which the new key neither finds nor orders; %s",
			n, keyString(n.key), stored, newTableHint(n))
	}
	for _, p := range d.common {
		if p[0].fd != nil && p[1].fd != nil {
			if why := keyChange(p[0].fd, p[1].fd); why != "" {
				c.report(position(p[1].fd), Breaking, "%s: key field %s changes type from %s to %s: %s; %s",
					n, p[1].name, typeName(p[0].fd), typeName(p[1].fd), why, newTableHint(n))
			}
		}
		if p[0].fd != nil && p[1].fd != nil && p[0].fd.HasPresence() != p[1].fd.HasPresence() {
			c.report(position(p[1].fd), Breaking, "%s: key field %s %s; %s",
				n, p[1].name, presenceChange(p[0].fd, p[1].fd), newTableHint(n))
		}
		if p[0].desc != p[1].desc {
			c.report(pos, Breaking, "%s: key field %s changes from %s to %s: %s, whose bytes the new key neither finds nor orders; %s",
				n, p[1].name, direction(p[0].desc), direction(p[1].desc), stored, newTableHint(n))
		}
	}
}

// presenceChange explains what a key field gaining or losing presence does
// to stored keys: an unset field with presence is keyed as absent (before
// every value), one without presence by its zero value.
func presenceChange(from, to protoreflect.FieldDescriptor) string {
	if to.HasPresence() {
		return fmt.Sprintf("gains presence (%s): a message leaving it unset is now keyed as absent, not by its zero value, under which the rows of such messages are stored", presenceOf(to))
	}
	return fmt.Sprintf("loses presence (%s before): rows of messages that left it unset are stored under an absent key, which the new key, always a value, never finds", presenceOf(from))
}

// presenceOf says why fd has presence.
func presenceOf(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.Message() != nil:
		return "a message field"
	case fd.ContainingOneof() != nil:
		return "an optional field"
	default:
		return "explicit presence"
	}
}

func direction(desc bool) string {
	if desc {
		return "descending"
	}
	return "ascending"
}

// checkValues compares the stored value fields of table o with the fields
// of its successor n, by number.
func (c *checker) checkValues(o, n *table) {
	fields := o.msg.Fields()
	for i := 0; i < fields.Len(); i++ {
		of := fields.Get(i)
		nf := n.msg.Fields().ByNumber(of.Number())
		if nf == nil || !o.stored(of) || wireCompatible(of, nf) {
			continue
		}
		c.report(position(nf), Breaking, "%s: field %d changes from %s %s to %s %s: rows already stored hold field %d as %s, which reads of the new %s lose or misread",
			n, of.Number(), typeName(of), of.Name(), typeName(nf), nf.Name(), of.Number(), typeName(of), typeName(nf))
	}
}

// checkJournal compares journal message o with its successor n.
func (c *checker) checkJournal(o, n *journal) {
	pos := optionPosition(n.msg)
	what := fmt.Sprintf("journal message %s", n.msg.FullName())
	if o.messageType != n.messageType {
		c.report(pos, Breaking, "%s: message_type changes from %q to %q: its journals are labeled app.gazette.dev/message-type=%s, which consumers no longer take for this message, and publishers select other journals; set message_type: %q to keep them",
			what, o.messageType, n.messageType, o.messageType, o.messageType)
	}
	if o.framing != n.framing {
		c.report(pos, Breaking, "%s: framing changes from %s to %s: the messages already in its journals are framed as %s, and consumers refuse those journals, whose content-type label says so",
			what, o.framing, n.framing, o.framing)
	}
	if o.uuid.fd != nil && n.uuid.fd != nil && o.uuid.fd.Number() != n.uuid.fd.Number() {
		c.report(pos, Breaking, "%s: uuid_field changes from %s (field %d) to %s (field %d): the messages already in its journals carry their UUID in field %d, so consumers read them without one and can neither sequence them nor drop their duplicates: exactly-once is lost",
			what, o.uuid.name, o.uuid.fd.Number(), n.uuid.name, n.uuid.fd.Number(), o.uuid.fd.Number())
	}
	if o.partitions != 0 && n.partitions != 0 && o.partitions != n.partitions {
		for _, cs := range c.cur.consumers {
			if len(cs.tables) != 0 && cs.consumes(n.msg.FullName()) && c.opts.Rescaled && n.partitions > o.partitions && n.partitions%o.partitions == 0 {
				c.report(pos, Note, "%s: family.partitions grows from %d to %d, and consumer %s, which holds tables, reads it: deploy it with `gazconsumer rescale --consumer %s`, which splits its shards' state by key across the new shards online (applying the new journals alone fails its shards)",
					what, o.partitions, n.partitions, cs.svc.FullName(), cs.svc.Name())
			} else if len(cs.tables) != 0 && cs.consumes(n.msg.FullName()) {
				c.report(pos, Breaking, "%s: family.partitions changes from %d to %d, and consumer %s, which holds tables, reads it: its shards' state is built under %d partitions (each shard records it with its checkpoint), and they fail once the family has %d, rather than split a key's state between shards; grow it with `gazconsumer rescale --consumer %s` (which splits its state by key across new shards, online) rather than by applying the new journals, or keep partitions: %d",
					what, o.partitions, n.partitions, cs.svc.FullName(), o.partitions, n.partitions, cs.svc.Name(), o.partitions)
			}
		}
	}
	d := diffKeys(o.partitionKey, n.partitionKey)
	routed := fmt.Sprintf("messages published from now on map to other partitions than the earlier messages of equal %s, so a key's messages and the state built from them are split between shards", keyString(o.partitionKey))
	if len(o.partitionKey) == 0 {
		routed = "earlier messages were spread over the partitions at random, so the state built from a key's earlier messages is split between other shards than the one its messages go to from now on"
	}
	making := "making the partition key " + keyString(n.partitionKey)
	if len(n.partitionKey) == 0 {
		making = "leaving none, so that messages are spread over the partitions at random"
	}
	for _, k := range d.added {
		c.report(pos, Breaking, "%s: partition key field %s added, %s: %s", what, k.name, making, routed)
	}
	for _, k := range d.removed {
		c.report(pos, Breaking, "%s: partition key field %s removed, %s: %s", what, k.name, making, routed)
	}
	if d.reordered {
		c.report(pos, Breaking, "%s: partition key fields reordered, %s: %s", what, making, routed)
	}
	for _, p := range d.common {
		if p[0].fd != nil && p[1].fd != nil && keyChange(p[0].fd, p[1].fd) != "" {
			c.report(position(p[1].fd), Breaking, "%s: partition key field %s changes type from %s to %s: %s",
				what, p[1].name, typeName(p[0].fd), typeName(p[1].fd), routed)
		}
	}
}

// checkConsumer compares consumer o with its successor n: n must still hold
// the successor of each table o held, and consume each journal message o
// consumed.
func (c *checker) checkConsumer(o, n *consumer) {
	for _, m := range o.tables {
		t := c.old.tableByMsg[m.FullName()]
		if t == nil {
			continue
		}
		if s := c.tables[t]; s == nil || !n.holds(s.msg.FullName()) {
			c.report(optionPosition(o.svc).previous(), Breaking, "consumer %s no longer holds %s: its shards' stores keep the table's rows, which nothing reads, updates or deletes any more, and which come back stale if the table is held again",
				o.svc.FullName(), t)
		}
	}
	for _, meth := range o.sources {
		in := meth.Input().FullName()
		if j := c.old.journalByMsg[in]; j != nil && c.journals[j] != nil {
			in = c.journals[j].msg.FullName()
		}
		if !n.consumes(in) {
			c.report(position(meth).previous(), Breaking, "consumer %s no longer consumes %s (rpc %s): its shards still read the journals of %s that their specs list as sources and fail on their first message, which no handler takes, and the state built from them is no longer kept; remove those journals from the shards' sources as you deploy it",
				o.svc.FullName(), meth.Input().FullName(), meth.Name(), meth.Input().FullName())
		}
	}
}

// keyDiff is the difference between two keys.
type keyDiff struct {
	added, removed []keyField
	// reordered is set if the fields of both keys are in another order.
	reordered bool
	// common pairs the fields of both keys: (old, new).
	common [][2]keyField
}

// diffKeys compares two keys. A field of one is a field of the other if it
// has the same number (it may be renamed) or, failing that, the same name.
func diffKeys(from, to []keyField) keyDiff {
	var d keyDiff
	match := make([]int, len(from)) // Index in to of each field of from, or -1.
	used := make([]bool, len(to))
	for i := range match {
		match[i] = -1
	}
	for pass := 0; pass < 2; pass++ {
		for i, f := range from {
			for j, t := range to {
				if match[i] != -1 || used[j] {
					continue
				}
				byNumber := f.fd != nil && t.fd != nil && f.fd.Number() == t.fd.Number()
				if (pass == 0 && byNumber) || (pass == 1 && f.name == t.name) {
					match[i], used[j] = j, true
				}
			}
		}
	}
	last := -1
	for i, j := range match {
		if j == -1 {
			d.removed = append(d.removed, from[i])
			continue
		}
		if j < last {
			d.reordered = true
		}
		last = j
		d.common = append(d.common, [2]keyField{from[i], to[j]})
	}
	for j, u := range used {
		if !u {
			d.added = append(d.added, to[j])
		}
	}
	return d
}

// position returns the position of the declaration of d.
func position(d protoreflect.Descriptor) Position {
	f := d.ParentFile()
	if f == nil {
		return Position{Path: string(d.FullName())}
	}
	p := Position{Path: f.Path()}
	if at, ok := protopos.Declared(d); ok {
		p.Line, p.Column = at.Line, at.Col
	}
	return p
}

// optionPosition returns the position of the gazconsumer option of d, a
// message or a service, or of d if the option's position is unknown.
func optionPosition(d protoreflect.Descriptor) Position {
	if d.ParentFile() == nil {
		return position(d)
	}
	var path []int32
	switch d.(type) {
	case protoreflect.MessageDescriptor:
		path = []int32{protopos.MessageOptionsField, int32(gcv1.E_Message.Field)}
	case protoreflect.ServiceDescriptor:
		path = []int32{protopos.ServiceOptionsField, int32(gcv1.E_Consumer.Field)}
	}
	// The option may be recorded as a whole, or by its field (as in
	// `option (gazconsumer.v1.message).table = {...}`).
	if at, ok := protopos.Recorded(d, path...); ok {
		return Position{Path: at.File, Line: at.Line, Column: at.Col}
	}
	return position(d)
}

// previous marks p as a position in the previous version.
func (p Position) previous() Position {
	p.Previous = true
	return p
}
