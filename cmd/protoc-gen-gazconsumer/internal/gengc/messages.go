package gengc

import (
	"github.com/dave/jennifer/jen"
)

// genMessageMethods generates the methods making journal message j a
// Gazette message.Message readable and writable with both the protobuf
// fixed framing and the JSON-lines framing.
func genMessageMethods(jf *jen.File, j *journalMsg) {
	recv := jen.Id("x").Op("*").Id(j.msg.GoIdent.GoName)
	name := j.msg.GoIdent.GoName
	uuid := j.uuid.GoName
	msgUUID := jen.Qual(pathMessage, "UUID")

	jf.Commentf("GetUUID returns the Gazette UUID held in field %s, or the zero UUID if it", j.uuid.Desc.Name())
	jf.Comment("does not hold exactly 16 bytes.")
	jf.Func().Params(recv.Clone()).Id("GetUUID").Params().Add(msgUUID.Clone()).Block(
		jen.Var().Id("u").Add(msgUUID.Clone()),
		jen.If(jen.Id("x").Op("!=").Nil().Op("&&").Len(jen.Id("x").Dot(uuid)).Op("==").Len(jen.Id("u"))).Block(
			jen.Copy(jen.Id("u").Index(jen.Empty(), jen.Empty()), jen.Id("x").Dot(uuid)),
		),
		jen.Return(jen.Id("u")),
	)
	jf.Line()

	jf.Commentf("SetUUID stores u in field %s.", j.uuid.Desc.Name())
	jf.Func().Params(recv.Clone()).Id("SetUUID").Params(jen.Id("u").Add(msgUUID.Clone())).Block(
		jen.Id("x").Dot(uuid).Op("=").Append(jen.Id("x").Dot(uuid).Index(jen.Empty(), jen.Lit(0)), jen.Id("u").Index(jen.Empty(), jen.Empty()).Op("...")),
	)
	jf.Line()

	jf.Commentf("NewAcknowledgement returns a new %s, which Gazette publishes to a journal to", name)
	jf.Comment("acknowledge the transaction of earlier messages written to it.")
	jf.Func().Params(recv.Clone()).Id("NewAcknowledgement").Params(jen.Qual(pathPB, "Journal")).Qual(pathMessage, "Message").Block(
		jen.Return(jen.New(jen.Id(name))),
	)
	jf.Line()

	jf.Comment("ProtoSize returns the size of the protobuf encoding of the message, for")
	jf.Comment("Gazette's protobuf fixed framing.")
	jf.Func().Params(recv.Clone()).Id("ProtoSize").Params().Int().Block(
		jen.Return(jen.Qual(pathCodec, "Size").Call(jen.Id("x"))),
	)
	jf.Line()

	jf.Comment("MarshalTo writes the protobuf encoding of the message into b, which holds")
	jf.Comment("exactly ProtoSize bytes, for Gazette's protobuf fixed framing.")
	jf.Func().Params(recv.Clone()).Id("MarshalTo").Params(jen.Id("b").Index().Byte()).Params(jen.Int(), jen.Error()).Block(
		jen.List(jen.Id("out"), jen.Err()).Op(":=").Qual(pathCodec, "Append").Call(
			jen.Id("b").Index(jen.Empty(), jen.Lit(0)), jen.Id("x")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Lit(0), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("marshaling "+string(j.msg.Desc.FullName())+": %w"), jen.Err())),
		).Else().If(jen.Len(jen.Id("out")).Op("!=").Len(jen.Id("b"))).Block(
			jen.Return(jen.Lit(0), jen.Qual(pathFmt, "Errorf").Call(
				jen.Lit("marshaling "+string(j.msg.Desc.FullName())+": encoding is %d bytes, not the %d of ProtoSize (was the message modified concurrently?)"),
				jen.Len(jen.Id("out")), jen.Len(jen.Id("b")))),
		),
		jen.Return(jen.Len(jen.Id("out")), jen.Nil()),
	)
	jf.Line()

	jf.Comment("Unmarshal replaces the message with the protobuf encoding b, for Gazette's")
	jf.Comment("protobuf fixed framing. The message does not retain b.")
	jf.Func().Params(recv.Clone()).Id("Unmarshal").Params(jen.Id("b").Index().Byte()).Error().Block(
		jen.Return(jen.Qual(pathCodec, "Unmarshal").Call(jen.Id("b"), jen.Id("x"))),
	)
	jf.Line()

	jf.Comment("MarshalJSONTo writes the message as one line of protobuf JSON, for Gazette's")
	jf.Comment("JSON-lines framing.")
	jf.Func().Params(recv.Clone()).Id("MarshalJSONTo").Params(jen.Id("w").Op("*").Qual(pathBufio, "Writer")).Params(jen.Int(), jen.Error()).Block(
		jen.List(jen.Id("b"), jen.Err()).Op(":=").Qual(pathProtojson, "Marshal").Call(jen.Id("x")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Lit(0), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("marshaling "+string(j.msg.Desc.FullName())+" to JSON: %w"), jen.Err())),
		),
		jen.Return(jen.Id("w").Dot("Write").Call(jen.Append(jen.Id("b"), jen.LitRune('\n')))),
	)
	jf.Line()

	jf.Comment("MarshalJSON returns the message as protobuf JSON.")
	jf.Func().Params(recv.Clone()).Id("MarshalJSON").Params().Params(jen.Index().Byte(), jen.Error()).Block(
		jen.Return(jen.Qual(pathProtojson, "Marshal").Call(jen.Id("x"))),
	)
	jf.Line()

	jf.Comment("UnmarshalJSON replaces the message with protobuf JSON b.")
	jf.Func().Params(recv.Clone()).Id("UnmarshalJSON").Params(jen.Id("b").Index().Byte()).Error().Block(
		jen.Return(jen.Qual(pathProtojson, "Unmarshal").Call(jen.Id("b"), jen.Id("x"))),
	)
	jf.Line()

	if len(j.partitionKey) != 0 {
		genPartitionKey(jf, j)
	}
}
