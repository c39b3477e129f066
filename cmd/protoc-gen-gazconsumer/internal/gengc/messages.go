package gengc

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// genMessageMethods generates the methods making journal message j a
// Gazette message.Message readable and writable with both the protobuf
// fixed framing and the JSON-lines framing (a journal's content type picks
// its framing), and its AppendPartitionKey.
func genMessageMethods(fc *fileCtx, j *journalMsg) {
	jf := fc.jf
	name := j.msg.GoIdent.GoName
	recv := func() *jen.Statement { return jen.Id("x").Op("*").Id(name) }
	x := jen.Id("x")
	method := func(doc []string, fn string, params []jen.Code, results jen.Code, body ...jen.Code) {
		fc.doc("%s", strings.Join(doc, " "))
		jf.Func().Params(recv()).Id(fn).Params(params...).Add(results).Block(body...)
		jf.Line()
	}
	uuid := j.uuid
	method([]string{
		fmt.Sprintf("GetUUID returns the Gazette UUID held in field %s, or the zero UUID if it", uuid.Desc.Name()),
		"does not hold exactly 16 bytes.",
	}, "GetUUID", nil, fc.q(pathMessage, "UUID"),
		jen.Return(fc.q(pathRuntime, "UUIDOf").Call(get(x, uuid))))
	// The field's array is reused: a publisher sets the UUID of every
	// message it publishes.
	method([]string{fmt.Sprintf("SetUUID stores u in field %s.", uuid.Desc.Name())},
		"SetUUID", []jen.Code{jen.Id("u").Add(fc.q(pathMessage, "UUID"))}, nil,
		set(x, uuid, jen.Append(get(x, uuid).Index(jen.Empty(), jen.Lit(0)), jen.Id("u").Index(jen.Empty(), jen.Empty()).Op("..."))))
	method([]string{
		fmt.Sprintf("NewAcknowledgement returns a new %s, which Gazette publishes to a journal to", name),
		"acknowledge the transaction of earlier messages written to it.",
	}, "NewAcknowledgement", []jen.Code{fc.q(pathPB, "Journal")}, fc.q(pathMessage, "Message"),
		jen.Return(jen.New(jen.Id(name))))
	method([]string{"ProtoSize returns the size of the protobuf encoding of the message, for", "Gazette's protobuf fixed framing."},
		"ProtoSize", nil, jen.Int(), jen.Return(fc.q(pathCodec, "Size").Call(x)))
	method([]string{"MarshalTo writes the protobuf encoding of the message into b, which holds", "exactly ProtoSize bytes, for Gazette's protobuf fixed framing."},
		"MarshalTo", []jen.Code{jen.Id("b").Index().Byte()}, jen.Params(jen.Int(), jen.Error()),
		jen.Return(fc.q(pathCodec, "MarshalTo").Call(jen.Id("b"), x)))
	method([]string{"Unmarshal replaces the message with the protobuf encoding b, for Gazette's", "protobuf fixed framing. The message does not retain b."},
		"Unmarshal", []jen.Code{jen.Id("b").Index().Byte()}, jen.Error(),
		jen.Return(fc.q(pathCodec, "Unmarshal").Call(jen.Id("b"), x)))
	method([]string{"MarshalJSONTo writes the message as one line of protobuf JSON, for Gazette's", "JSON-lines framing."},
		"MarshalJSONTo", []jen.Code{jen.Id("w").Op("*").Add(fc.q(pathBufio, "Writer"))}, jen.Params(jen.Int(), jen.Error()),
		jen.Return(fc.q(pathCodec, "MarshalJSONTo").Call(jen.Id("w"), x)))
	method([]string{"MarshalJSON returns the message as protobuf JSON."},
		"MarshalJSON", nil, jen.Params(jen.Index().Byte(), jen.Error()),
		jen.Return(fc.q(pathProtojson, "Marshal").Call(x)))
	method([]string{"UnmarshalJSON replaces the message with protobuf JSON b."},
		"UnmarshalJSON", []jen.Code{jen.Id("b").Index().Byte()}, jen.Error(),
		jen.Return(fc.q(pathProtojson, "Unmarshal").Call(jen.Id("b"), x)))

	if len(j.partitionKey) != 0 {
		method([]string{
			"AppendPartitionKey appends to b the order-preserving encoding of the",
			"message's partition key fields, which selects the partition journal it is",
			"published to.",
		}, "AppendPartitionKey", []jen.Code{jen.Id("b").Index().Byte()}, jen.Index().Byte(), appendPartitionKey(fc, x, j.partitionKey)...)
	}
}

// genPublisher generates the constructor of the typed Publisher of journal
// message j, for programs publishing outside of a consumer.
func genPublisher(fc *fileCtx, j *journalMsg) {
	name := j.msg.GoIdent.GoName
	route := "spreading them over the partitions at random (it has no partition key)"
	if len(j.partitionKey) != 0 {
		route = fmt.Sprintf("to the partition their partition key (%s) maps them to, as the shards consuming them assume", fieldNames(j.partitionKey))
	}
	sel := j.selector()
	fc.doc("%s returns the Publisher through p of %s messages, to the journals labeled %s, %s.",
		publisherCtorName(j), name, sel, route)
	ptr := jen.Op("*").Id(name)
	fc.jf.Func().Id(publisherCtorName(j)).Params(jen.Id("p").Op("*").Add(fc.q(pathProducer, "Producer"))).
		Op("*").Add(fc.q(pathProducer, "Publisher")).Types(ptr).
		Block(jen.Return(fc.q(pathProducer, "For").Types(ptr.Clone()).Call(jen.Id("p"), jen.Lit(sel))))
	fc.jf.Line()
}

// appendPartitionKey returns the statements appending to b the encoding of
// fields fs of x, a partition key's, and returning b.
func appendPartitionKey(fc *fileCtx, x jen.Code, fs []*protogen.Field) []jen.Code {
	var body []jen.Code
	for i, f := range fs {
		app := appendValue(fc, jen.Id("b"), f, get(x, f))
		if i == len(fs)-1 {
			body = append(body, jen.Return(app))
		} else {
			body = append(body, jen.Id("b").Op("=").Add(app))
		}
	}
	return body
}

// appendValue returns an expression appending to b the ascending encoding
// of value, of field f: a partition key's. Fields with presence encode
// their value, as if they had none: a partition key only routes messages.
func appendValue(fc *fileCtx, b jen.Code, f *protogen.Field, value *jen.Statement) jen.Code {
	asc := fc.q(pathKeyenc, "Ascending")
	switch f.Desc.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.EnumKind:
		return fc.q(pathKeyenc, "AppendInt").Call(b, jen.Int64().Call(value), asc)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return fc.q(pathKeyenc, "AppendInt").Call(b, value, asc)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return fc.q(pathKeyenc, "AppendUint").Call(b, jen.Uint64().Call(value), asc)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return fc.q(pathKeyenc, "AppendUint").Call(b, value, asc)
	case protoreflect.BoolKind:
		return fc.q(pathKeyenc, "AppendBool").Call(b, value, asc)
	case protoreflect.StringKind:
		return fc.q(pathKeyenc, "AppendString").Call(b, value, asc)
	case protoreflect.BytesKind:
		return fc.q(pathKeyenc, "AppendBytes").Call(b, value, asc)
	case protoreflect.MessageKind, protoreflect.GroupKind: // A Timestamp, as checkKeyField checked.
		return fc.q(pathKeyenc, "AppendTimestamp").Call(b, value.Clone().Dot("GetSeconds").Call(), value.Clone().Dot("GetNanos").Call(), asc)
	}
	panic(fmt.Sprintf("unsupported key field kind %v", f.Desc.Kind()))
}

// genNewMessage generates the package's NewMessage, covering journals.
func genNewMessage(fc *fileCtx, journals []*journalMsg) {
	jf := fc.jf
	jf.Comment("NewMessage returns a new message of the journal message type named by the")
	jf.Comment("journal's \"app.gazette.dev/message-type\" label, among those of this package.")
	jf.Comment("It fails if the label is missing or names no such type, or if the journal's")
	jf.Comment("\"content-type\" label is not the framing the type is annotated with.")
	jf.Func().Id("NewMessage").Params(jen.Id("spec").Op("*").Add(fc.q(pathPB, "JournalSpec"))).
		Params(fc.q(pathMessage, "Message"), jen.Error()).
		Block(jen.Return(jen.Id(messageTypesVar).Dot("New").Call(jen.Id("spec"))))
	jf.Line()
	args := []jen.Code{jen.Lit("this package")}
	for _, j := range journals {
		args = append(args, jen.Line().Add(fc.q(pathRuntime, "JournalType").Types(fc.ident(j.msg.GoIdent)).
			Call(jen.Lit(j.messageType), jen.Lit(j.contentType))))
	}
	jf.Commentf("%s are the journal message types of NewMessage.", messageTypesVar)
	jf.Var().Id(messageTypesVar).Op("=").Add(fc.q(pathRuntime, "NewMessageTypes").Call(append(args, jen.Line())...))
	jf.Line()
}
