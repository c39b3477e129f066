// Package roundtrip checks that the messages of generated packages survive
// the codecs and framings of generated code. Tests of protoc-gen-gazconsumer
// copy it into the modules of generated code they build.
//
// Every message of the .proto files given is populated with random values
// through protobuf's reflection (every field kind, lists, maps, oneofs,
// groups, extensions, unknown fields, nested messages, values at the edges
// of their types), and then:
//
//   - its encoding by runtime/codec (the fast codecs where the plugin wrote
//     them) is byte for byte protobuf's deterministic one, but for the order
//     of map entries (neither protobuf's default encoding nor the fast
//     codecs order them), and its size runtime/codec's Size;
//   - codec.Unmarshal (into a message holding other values) and
//     codec.UnmarshalNew of protobuf's encoding, and protobuf's Unmarshal of
//     the codec's, are equal to it (proto.Equal);
//   - for a journal message, a stream of messages written with each framing
//     (Gazette's protobuf fixed framing and JSON lines) reads back equal, into
//     messages of the package's NewMessage for the framing it is annotated
//     with, and into new messages for the other (JSON drops unknown fields).
package roundtrip

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
	"github.com/gazconsumer/gazconsumer/runtime/codec"
)

// Rounds is how many random messages of each type are taken round.
const Rounds = 40

// maxDepth bounds the nesting of populated messages (recursive types).
const maxDepth = 3

// Check checks the messages of the .proto files at paths, of one Go
// package whose NewMessage is newMessage (nil if it has none).
func Check(t *testing.T, newMessage func(*protocol.JournalSpec) (message.Message, error), paths ...string) {
	t.Helper()
	for _, p := range paths {
		fd, err := protoregistry.GlobalFiles.FindFileByPath(p)
		if err != nil {
			t.Errorf("%s is not registered: %v", p, err)
			continue
		}
		var mds []protoreflect.MessageDescriptor
		var walk func(protoreflect.MessageDescriptors)
		walk = func(ms protoreflect.MessageDescriptors) {
			for i := range ms.Len() {
				if md := ms.Get(i); !md.IsMapEntry() {
					mds = append(mds, md)
					walk(md.Messages())
				}
			}
		}
		walk(fd.Messages())
		var fast int
		for _, md := range mds {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Errorf("message %s is not registered: %v", md.FullName(), err)
				continue
			}
			if _, ok := mt.New().Interface().(interface{ SizeVT() int }); ok {
				fast++
			}
			checkType(t, mt, newMessage)
		}
		t.Logf("%s: %d messages, %d with fast codecs", p, len(mds), fast)
	}
}

// CheckText takes the messages of type name written in texts (protobuf's
// text format) round, as Check does random ones (comparing their encodings
// byte for byte), and checks that both codecs decode the encodings of each
// two consecutive ones, concatenated, alike: merged.
func CheckText(t *testing.T, newMessage func(*protocol.JournalSpec) (message.Message, error), name string, texts ...string) {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		t.Errorf("message %s is not registered: %v", name, err)
		return
	}
	var encodings [][]byte
	for i, text := range texts {
		m := mt.New().Interface()
		if err := prototext.Unmarshal([]byte(text), m); err != nil {
			t.Errorf("%s %d: %v", name, i, err)
			return
		}
		if err := checkMessage(m, true, newMessage); err != nil {
			t.Errorf("%s %d: %v\nmessage: %s", name, i, err, prototext.Format(m))
		}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Errorf("%s %d: %v", name, i, err)
			return
		}
		encodings = append(encodings, b)
	}
	for i := 1; i < len(encodings); i++ {
		if err := decodeAlike(mt, fmt.Sprintf("the encodings of %d and %d", i-1, i), slices.Concat(encodings[i-1], encodings[i])); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// checkType takes Rounds random messages of mt round.
func checkType(t *testing.T, mt protoreflect.MessageType, newMessage func(*protocol.JournalSpec) (message.Message, error)) {
	t.Helper()
	name := mt.Descriptor().FullName()
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(h.Sum64(), 1))
	failures := 0
	for round := range Rounds {
		// Half the rounds have maps of one entry at most, whose encodings
		// are compared byte for byte.
		p := populator{r: r, maxMap: 1 + round%2*2}
		m := mt.New()
		p.populate(m, 0)
		if err := checkMessage(m.Interface(), p.maxMap == 1, newMessage); err != nil {
			t.Errorf("%s, round %d: %v\nmessage: %s", name, round, err, prototext.Format(m.Interface()))
			if failures++; failures == 3 {
				return
			}
		}
	}
}

// checkMessage takes m round, comparing encodings byte for byte if exact.
func checkMessage(m proto.Message, exact bool, newMessage func(*protocol.JournalSpec) (message.Message, error)) error {
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("protobuf's Marshal: %w", err)
	}
	got, err := codec.Append(nil, m)
	if err != nil {
		return fmt.Errorf("codec.Append: %w", err)
	}
	if exact && !bytes.Equal(got, want) {
		return fmt.Errorf("codec.Append encodes\n%x, protobuf\n%x", got, want)
	} else if len(got) != len(want) {
		return fmt.Errorf("codec.Append encodes %d bytes (%x), protobuf %d (%x)", len(got), got, len(want), want)
	}
	if n := codec.Size(m); n != len(want) {
		return fmt.Errorf("codec.Size is %d, the encoding %d bytes", n, len(want))
	}
	newOf := func() proto.Message { return m.ProtoReflect().Type().New().Interface() }

	// Decodings of either encoding, by either codec.
	other := newOf()
	(&populator{r: rand.New(rand.NewPCG(uint64(len(want)), 2)), maxMap: 2}).populate(other.ProtoReflect(), 0)
	decodings := []struct {
		what string
		into proto.Message
		fn   func(proto.Message) error
	}{
		{"codec.Unmarshal of protobuf's encoding, into a message holding other values", other, func(x proto.Message) error { return codec.Unmarshal(want, x) }},
		{"codec.UnmarshalNew of protobuf's encoding", newOf(), func(x proto.Message) error { return codec.UnmarshalNew(want, x) }},
		{"protobuf's Unmarshal of codec.Append's encoding", newOf(), func(x proto.Message) error { return proto.Unmarshal(got, x) }},
	}
	for _, d := range decodings {
		if err := d.fn(d.into); err != nil {
			return fmt.Errorf("%s: %w (encoding %x)", d.what, err, want)
		} else if !proto.Equal(d.into, m) {
			return fmt.Errorf("%s differs: %s (encoding %x)", d.what, prototext.Format(d.into), want)
		}
	}

	// Encodings protobuf's Marshal doesn't write, but other writers may:
	// another message's before (which decodes as the two merged), and the
	// fields in the reverse order of their numbers. Both codecs decode them
	// alike.
	otherB, err := proto.Marshal(other)
	if err != nil {
		return err
	}
	if err := decodeAlike(m.ProtoReflect().Type(), "another message's encoding followed by protobuf's", append(otherB, want...)); err != nil {
		return err
	} else if err := decodeAlike(m.ProtoReflect().Type(), "protobuf's encoding, its fields reversed", reversed(want)); err != nil {
		return err
	}

	// A journal message, through both framings.
	opts, _ := proto.GetExtension(m.ProtoReflect().Descriptor().Options(), gcv1.E_Message).(*gcv1.MessageOptions)
	journal := opts.GetJournal()
	if journal == nil {
		return nil
	}
	if newMessage == nil {
		return errors.New("a journal message, of a package without NewMessage")
	}
	annotated := labels.ContentType_ProtoFixed
	if journal.GetFraming() == gcv1.Framing_FRAMING_JSON {
		annotated = labels.ContentType_JSONLines
	}
	messageType := journal.GetMessageType()
	if messageType == "" {
		messageType = string(m.ProtoReflect().Descriptor().FullName())
	}
	second := newOf()
	(&populator{r: rand.New(rand.NewPCG(uint64(len(want)), 3)), maxMap: 2}).populate(second.ProtoReflect(), 0)
	stream := []proto.Message{m, second, m}
	for _, ct := range []string{labels.ContentType_ProtoFixed, labels.ContentType_JSONLines} {
		framing, err := message.FramingByContentType(ct)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		for _, x := range stream {
			if err := framing.Marshal(x, bw); err != nil {
				return fmt.Errorf("framing %s: Marshal: %w", ct, err)
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		unmarshal := framing.NewUnmarshalFunc(bufio.NewReader(bytes.NewReader(buf.Bytes())))
		for i, x := range stream {
			var into message.Message
			if ct == annotated {
				spec := &protocol.JournalSpec{Name: "a/journal", LabelSet: protocol.MustLabelSet(
					labels.ContentType, ct, labels.MessageType, messageType)}
				if into, err = newMessage(spec); err != nil {
					return fmt.Errorf("NewMessage: %w", err)
				}
			} else {
				into = newOf().(message.Message)
			}
			if err := unmarshal(into); err != nil {
				return fmt.Errorf("framing %s: message %d of the stream: %w\nstream: %q", ct, i, err, buf.Bytes())
			}
			want := x
			if ct == labels.ContentType_JSONLines {
				// A copy without unknown fields. (Not proto.Clone, which
				// drops -0.0 from floating-point fields without presence.)
				want = newOf()
				if b, err := proto.Marshal(x); err != nil {
					return err
				} else if err := proto.Unmarshal(b, want); err != nil {
					return err
				}
				discardUnknown(want.ProtoReflect())
			}
			if !proto.Equal(into.(proto.Message), want) {
				return fmt.Errorf("framing %s: message %d of the stream reads back as %s\nnot as %s\nstream: %q", ct, i, prototext.Format(into.(proto.Message)), prototext.Format(want), buf.Bytes())
			}
		}
		if err := unmarshal(newOf().(message.Message)); !errors.Is(err, io.EOF) {
			return fmt.Errorf("framing %s: after the stream, %v, not io.EOF", ct, err)
		}
	}
	return nil
}

// decodeAlike checks that protobuf's Unmarshal and codec.Unmarshal decode
// b, a message of type mt, alike.
func decodeAlike(mt protoreflect.MessageType, what string, b []byte) error {
	byProto, byCodec := mt.New().Interface(), mt.New().Interface()
	errP, errC := proto.Unmarshal(b, byProto), codec.Unmarshal(b, byCodec)
	if (errP == nil) != (errC == nil) {
		return fmt.Errorf("decoding %s: protobuf's Unmarshal fails with %v, codec.Unmarshal with %v (encoding %x)", what, errP, errC, b)
	} else if errP == nil && !proto.Equal(byProto, byCodec) {
		return fmt.Errorf("decoding %s: codec.Unmarshal decodes %s\nprotobuf %s\n(encoding %x)", what, prototext.Format(byCodec), prototext.Format(byProto), b)
	}
	return nil
}

// reversed returns encoding b with its fields in the reverse order of their
// numbers, those of a number in their order.
func reversed(b []byte) []byte {
	type field struct {
		num protowire.Number
		b   []byte
	}
	var fields []field
	for len(b) != 0 {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			panic(protowire.ParseError(n))
		}
		fields = append(fields, field{num, b[:n]})
		b = b[n:]
	}
	slices.SortStableFunc(fields, func(a, b field) int { return int(b.num) - int(a.num) })
	var out []byte
	for _, f := range fields {
		out = append(out, f.b...)
	}
	return out
}

// discardUnknown removes the unknown fields of m and of its messages.
func discardUnknown(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
					discardUnknown(v.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					discardUnknown(v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			discardUnknown(v.Message())
		}
		return true
	})
	if m.GetUnknown() != nil {
		m.SetUnknown(nil)
	}
}

// A populator sets random values into messages.
type populator struct {
	r      *rand.Rand
	maxMap int // Entries of a map, at most.
}

// populate sets random values into some of the fields of m, a message at
// depth: always its required fields, one field of some of its oneofs, some
// of its extensions, and perhaps unknown fields.
func (p *populator) populate(m protoreflect.Message, depth int) {
	md := m.Descriptor()
	switch md.FullName() {
	case "google.protobuf.Timestamp": // Valid, as JSON requires.
		m.Set(md.Fields().ByName("seconds"), protoreflect.ValueOfInt64(-62135596800+p.r.Int64N(253402300800+62135596800)))
		m.Set(md.Fields().ByName("nanos"), protoreflect.ValueOfInt32(p.r.Int32N(1e9)))
		return
	case "google.protobuf.Duration":
		s, n := p.r.Int64N(315576000001), p.r.Int32N(1e9)
		if p.r.IntN(2) == 0 {
			s, n = -s, -n
		}
		m.Set(md.Fields().ByName("seconds"), protoreflect.ValueOfInt64(s))
		m.Set(md.Fields().ByName("nanos"), protoreflect.ValueOfInt32(n))
		return
	}
	if md.ParentFile().Package() == "google.protobuf" && !strings.HasSuffix(string(md.Name()), "Value") && md.Name() != "Empty" {
		return // Well-known types of their own JSON (Any, Struct, FieldMask...): left empty.
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			continue
		}
		if fd.Cardinality() != protoreflect.Required && (p.r.IntN(3) == 0 || fd.Message() != nil && depth >= maxDepth) {
			continue
		}
		p.set(m, fd, depth)
	}
	oneofs := md.Oneofs()
	for i := range oneofs.Len() {
		od := oneofs.Get(i)
		if od.IsSynthetic() || p.r.IntN(4) == 0 {
			continue
		}
		fd := od.Fields().Get(p.r.IntN(od.Fields().Len()))
		if fd.Message() == nil || depth < maxDepth {
			p.set(m, fd, depth)
		}
	}
	if md.ExtensionRanges().Len() != 0 {
		protoregistry.GlobalTypes.RangeExtensionsByMessage(md.FullName(), func(xt protoreflect.ExtensionType) bool {
			if xd := xt.TypeDescriptor(); p.r.IntN(2) == 0 && (xd.Message() == nil || depth < maxDepth) {
				p.set(m, xd, depth)
			}
			return true
		})
	}
	if p.r.IntN(5) == 0 {
		m.SetUnknown(p.unknown(md))
	}
}

// set sets a random value into field fd of m.
func (p *populator) set(m protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) {
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		for range p.r.IntN(p.maxMap + 1) {
			k := p.scalar(fd.MapKey()).MapKey()
			if fd.MapValue().Message() != nil {
				v := mp.NewValue()
				p.populate(v.Message(), depth+1)
				mp.Set(k, v)
			} else {
				mp.Set(k, p.scalar(fd.MapValue()))
			}
		}
	case fd.IsList():
		l := m.Mutable(fd).List()
		for range 1 + p.r.IntN(3) {
			if fd.Message() != nil {
				v := l.NewElement()
				p.populate(v.Message(), depth+1)
				l.Append(v)
			} else {
				l.Append(p.scalar(fd))
			}
		}
	case fd.Message() != nil:
		p.populate(m.Mutable(fd).Message(), depth+1)
	default:
		m.Set(fd, p.scalar(fd))
	}
}

// Values at the edges of their types, taken one time in two.
var (
	edgeInts    = []int64{0, 1, -1, 127, 128, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	edgeUints   = []uint64{0, 1, 127, 128, math.MaxUint32, math.MaxUint64}
	edgeFloats  = []float64{0, math.Copysign(0, -1), 1.5, -2.25, math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat32, math.SmallestNonzeroFloat64}
	stringRunes = []rune("aZ09 \"\\\n\t\x00é世😀\u2028\uffff")
)

// scalar returns a random value of fd, a field of no message.
func (p *populator) scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	edge := p.r.IntN(2) == 0
	i64 := func() int64 {
		if edge {
			return edgeInts[p.r.IntN(len(edgeInts))]
		}
		return int64(p.r.Uint64()) >> p.r.IntN(64)
	}
	u64 := func() uint64 {
		if edge {
			return edgeUints[p.r.IntN(len(edgeUints))]
		}
		return p.r.Uint64() >> p.r.IntN(64)
	}
	f64 := func() float64 {
		if edge {
			return edgeFloats[p.r.IntN(len(edgeFloats))]
		}
		return (p.r.Float64() - 0.5) * math.Pow(10, float64(p.r.IntN(40)-20))
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(p.r.IntN(2) == 0)
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if !ed.IsClosed() && p.r.IntN(8) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(i64())))
		}
		return protoreflect.ValueOfEnum(ed.Values().Get(p.r.IntN(ed.Values().Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(i64()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(i64())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(u64()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(u64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(f64()))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(f64())
	case protoreflect.StringKind:
		var b strings.Builder
		for range p.r.IntN(9) {
			b.WriteRune(stringRunes[p.r.IntN(len(stringRunes))])
		}
		return protoreflect.ValueOfString(b.String())
	case protoreflect.BytesKind:
		b := make([]byte, p.r.IntN(17))
		for i := range b {
			b[i] = byte(p.r.IntN(256))
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic(fmt.Sprintf("no scalar of kind %v", fd.Kind()))
}

// unknown returns random fields, of numbers md doesn't declare, of every
// wire type.
func (p *populator) unknown(md protoreflect.MessageDescriptor) []byte {
	var b []byte
	for range 1 + p.r.IntN(3) {
		num := protowire.Number(5000 + p.r.IntN(1000))
		if md.Fields().ByNumber(num) != nil || md.ExtensionRanges().Has(num) || md.ReservedRanges().Has(num) {
			continue
		}
		switch p.r.IntN(5) {
		case 0:
			b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), p.r.Uint64()>>p.r.IntN(64))
		case 1:
			b = protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), p.r.Uint32())
		case 2:
			b = protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), p.r.Uint64())
		case 3:
			b = protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), "unknown")
		case 4:
			b = protowire.AppendTag(b, num, protowire.StartGroupType)
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 7)
			b = protowire.AppendTag(b, num, protowire.EndGroupType)
		}
	}
	return b
}
