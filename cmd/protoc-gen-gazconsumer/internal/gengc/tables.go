package gengc

import (
	"fmt"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// tableNames are the package-level names generated for t.
func tableNames(t *table) []string {
	n := t.msg.GoIdent.GoName
	return []string{n + "Table", n + "Key", "New" + n + "Table"}
}

// keyGoType returns the Go type of key field f.
func keyGoType(f *protogen.Field) jen.Code {
	switch f.Desc.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return jen.Int32()
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return jen.Int64()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return jen.Uint32()
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return jen.Uint64()
	case protoreflect.BoolKind:
		return jen.Bool()
	case protoreflect.StringKind:
		return jen.String()
	case protoreflect.BytesKind:
		return jen.Index().Byte()
	case protoreflect.EnumKind:
		return jen.Qual(string(f.Enum.GoIdent.GoImportPath), f.Enum.GoIdent.GoName)
	case protoreflect.MessageKind: // google.protobuf.Timestamp, checked by checkKeyField.
		return jen.Op("*").Qual(pathTimestamp, "Timestamp")
	}
	panic(fmt.Sprintf("unsupported key field kind %v", f.Desc.Kind()))
}

// appendKey returns an expression appending the encoding of value, of key
// field f, to b.
func appendKey(b jen.Code, f *protogen.Field, value *jen.Statement, desc bool) jen.Code {
	dir := jen.Qual(pathKeyenc, "Ascending")
	if desc {
		dir = jen.Qual(pathKeyenc, "Descending")
	}
	k := jen.Qual(pathKeyenc, "AppendInt")
	switch f.Desc.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.EnumKind:
		return k.Call(b, jen.Int64().Call(value), dir)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return k.Call(b, value, dir)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return jen.Qual(pathKeyenc, "AppendUint").Call(b, jen.Uint64().Call(value), dir)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return jen.Qual(pathKeyenc, "AppendUint").Call(b, value, dir)
	case protoreflect.BoolKind:
		return jen.Qual(pathKeyenc, "AppendBool").Call(b, value, dir)
	case protoreflect.StringKind:
		return jen.Qual(pathKeyenc, "AppendString").Call(b, value, dir)
	case protoreflect.BytesKind:
		return jen.Qual(pathKeyenc, "AppendBytes").Call(b, value, dir)
	case protoreflect.MessageKind:
		return jen.Qual(pathKeyenc, "AppendTimestamp").Call(b, value.Clone().Dot("GetSeconds").Call(), value.Clone().Dot("GetNanos").Call(), dir)
	}
	panic(fmt.Sprintf("unsupported key field kind %v", f.Desc.Kind()))
}

// keyDoc describes the key of t, as "(a, b descending)".
func keyDoc(t *table) string {
	s := "("
	for i, k := range t.key {
		if i != 0 {
			s += ", "
		}
		s += string(k.field.Desc.Name())
		if k.desc {
			s += " descending"
		}
	}
	return s + ")"
}

// elidedKey returns the key fields of t left out of stored values: those
// without field presence, whose zero value a row can't tell from unset, so
// that setting them back from the key restores the row exactly.
func elidedKey(t *table) []keyField {
	var out []keyField
	for _, k := range t.key {
		if !k.field.Desc.HasPresence() && k.field.Desc.Kind() != protoreflect.MessageKind {
			out = append(out, k)
		}
	}
	return out
}

// decodeKey returns statements decoding key field f from b into k.
func decodeKey(f *protogen.Field, desc bool, errPrefix string) []jen.Code {
	dir := jen.Qual(pathKeyenc, "Ascending")
	if desc {
		dir = jen.Qual(pathKeyenc, "Descending")
	}
	fail := jen.If(jen.Err().Op("!=").Nil()).Block(
		jen.Return(jen.Id("k"), jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"decoding key field "+string(f.Desc.Name())+": %w"), jen.Err())),
	)
	field := jen.Id("k").Dot(f.GoName)
	decodeVia := func(fn string, conv func(jen.Code) jen.Code) []jen.Code {
		return []jen.Code{
			jen.List(jen.Id("b"), jen.Id("v"), jen.Err()).Op("=").Qual(pathKeyenc, fn).Call(jen.Id("b"), dir),
			fail,
			field.Clone().Op("=").Add(conv(jen.Id("v"))),
		}
	}
	same := func(v jen.Code) jen.Code { return v }
	switch f.Desc.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return append([]jen.Code{jen.Var().Id("v").Int64()}, decodeVia("DecodeInt", func(v jen.Code) jen.Code { return jen.Int32().Call(v) })...)
	case protoreflect.EnumKind:
		return append([]jen.Code{jen.Var().Id("v").Int64()}, decodeVia("DecodeInt", func(v jen.Code) jen.Code { return keyGoType(f).(*jen.Statement).Clone().Call(v) })...)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return append([]jen.Code{jen.Var().Id("v").Int64()}, decodeVia("DecodeInt", same)...)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return append([]jen.Code{jen.Var().Id("v").Uint64()}, decodeVia("DecodeUint", func(v jen.Code) jen.Code { return jen.Uint32().Call(v) })...)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return append([]jen.Code{jen.Var().Id("v").Uint64()}, decodeVia("DecodeUint", same)...)
	case protoreflect.BoolKind:
		return append([]jen.Code{jen.Var().Id("v").Bool()}, decodeVia("DecodeBool", same)...)
	case protoreflect.StringKind:
		return append([]jen.Code{jen.Var().Id("v").String()}, decodeVia("DecodeString", same)...)
	case protoreflect.BytesKind:
		return append([]jen.Code{jen.Var().Id("v").Index().Byte()}, decodeVia("DecodeBytes", same)...)
	case protoreflect.MessageKind:
		return []jen.Code{
			jen.Var().Id("s").Int64(), jen.Var().Id("n").Int32(),
			jen.List(jen.Id("b"), jen.Id("s"), jen.Id("n"), jen.Err()).Op("=").Qual(pathKeyenc, "DecodeTimestamp").Call(jen.Id("b"), dir),
			fail,
			field.Clone().Op("=").Op("&").Qual(pathTimestamp, "Timestamp").Values(jen.Dict{jen.Id("Seconds"): jen.Id("s"), jen.Id("Nanos"): jen.Id("n")}),
		}
	}
	panic(fmt.Sprintf("unsupported key field kind %v", f.Desc.Kind()))
}

// genTable generates the key type and typed accessor of table t.
func genTable(jf *jen.File, t *table) {
	row := t.msg.GoIdent.GoName
	keyT, tableT := row+"Key", row+"Table"
	prefix := "gazconsumer" + row + "TablePrefix"
	n := len(t.key)
	errPrefix := fmt.Sprintf("table %s: ", t.name)

	jf.Commentf("%s is the key of table %q, whose rows are %s messages ordered", keyT, t.name, row)
	jf.Commentf("by %s.", keyDoc(t))
	var fields []jen.Code
	for _, k := range t.key {
		fields = append(fields, jen.Id(k.field.GoName).Add(keyGoType(k.field)))
	}
	jf.Type().Id(keyT).Struct(fields...)
	jf.Line()

	jf.Commentf("appendTo appends to b the store key of the first n fields of k: %s, then", prefix)
	jf.Comment("the fields' encodings.")
	stmts := []jen.Code{jen.Id("b").Op("=").Append(jen.Id("b"), jen.Id(prefix).Op("..."))}
	for i, k := range t.key {
		stmts = append(stmts, jen.If(jen.Id("n").Op(">").Lit(i)).Block(
			jen.Id("b").Op("=").Add(appendKey(jen.Id("b"), k.field, jen.Id("k").Dot(k.field.GoName), k.desc)),
		))
	}
	stmts = append(stmts, jen.Return(jen.Id("b")))
	jf.Func().Params(jen.Id("k").Id(keyT)).Id("appendTo").Params(jen.Id("b").Index().Byte(), jen.Id("n").Int()).Index().Byte().Block(stmts...)
	jf.Line()

	elided := elidedKey(t)
	if len(elided) != 0 {
		jf.Comment("restore sets the key fields of row which stored values leave out.")
		var sets []jen.Code
		for _, k := range elided {
			v := jen.Id("k").Dot(k.field.GoName)
			if k.field.Desc.Kind() == protoreflect.BytesKind {
				v = jen.Append(jen.Index().Byte().Parens(jen.Nil()), v.Op("..."))
			}
			sets = append(sets, jen.Id("row").Dot(k.field.GoName).Op("=").Add(v))
		}
		jf.Func().Params(jen.Id("k").Id(keyT)).Id("restore").Params(jen.Id("row").Op("*").Id(row)).Block(sets...)
		jf.Line()
	}

	jf.Commentf("%s begins the key of every row of table %q.", prefix, t.name)
	jf.Var().Id(prefix).Op("=").Qual(pathKeyenc, "AppendString").Call(jen.Nil(), jen.Lit(t.name), jen.Qual(pathKeyenc, "Ascending"))
	jf.Line()

	if len(elided) != 0 {
		jf.Commentf("decode%s returns the key of b, the store key of a row of table %q.", keyT, t.name)
		body := []jen.Code{
			jen.Var().Id("k").Id(keyT),
			jen.If(jen.Op("!").Qual(pathBytes, "HasPrefix").Call(jen.Id("b"), jen.Id(prefix))).Block(
				jen.Return(jen.Id("k"), jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"key %x is not of the table"), jen.Id("b"))),
			),
			jen.Id("b").Op("=").Id("b").Index(jen.Len(jen.Id(prefix)), jen.Empty()),
			jen.Var().Err().Error(),
		}
		for _, k := range t.key {
			body = append(body, jen.Block(decodeKey(k.field, k.desc, errPrefix)...))
		}
		body = append(body, jen.Return(jen.Id("k"), jen.Nil()))
		jf.Func().Id("decode"+keyT).Params(jen.Id("b").Index().Byte()).Params(jen.Id(keyT), jen.Error()).Block(body...)
		jf.Line()
	}

	jf.Commentf("%s is table %q of a store: %s rows ordered by", tableT, t.name, row)
	jf.Commentf("%s. Its reads see the writes of the current transaction.", keyDoc(t))
	jf.Type().Id(tableT).Struct(
		jen.Id("kv").Qual(pathRuntime, "KV"),
		jen.Id("buf").Op("*").Index().Byte().Comment("Scratch of the keys and values of point operations."),
	)
	jf.Line()

	jf.Commentf("New%s returns table %q of the store view kv.", tableT, t.name)
	jf.Func().Id("New" + tableT).Params(jen.Id("kv").Qual(pathRuntime, "KV")).Id(tableT).Block(
		jen.Return(jen.Id(tableT).Values(jen.Dict{jen.Id("kv"): jen.Id("kv"), jen.Id("buf"): jen.New(jen.Index().Byte())})),
	)
	jf.Line()

	recv := jen.Id("t").Id(tableT)
	jf.Commentf("KeyOf returns the key of row.")
	var dict = jen.Dict{}
	for _, k := range t.key {
		dict[jen.Id(k.field.GoName)] = jen.Id("row").Dot("Get" + k.field.GoName).Call()
	}
	jf.Func().Params(recv.Clone()).Id("KeyOf").Params(jen.Id("row").Op("*").Id(row)).Id(keyT).Block(
		jen.Return(jen.Id(keyT).Values(dict)),
	)
	jf.Line()

	jf.Comment("encode returns the store key of the first n fields of k, in a new slice: a")
	jf.Comment("scan's bounds outlive the point operations of its callback.")
	jf.Func().Params(recv.Clone()).Id("encode").Params(jen.Id("k").Id(keyT), jen.Id("n").Int()).Index().Byte().Block(
		jen.Id("b").Op(":=").Make(jen.Index().Byte(), jen.Lit(0), jen.Len(jen.Id(prefix)).Op("+").Lit(32)),
		jen.Return(jen.Id("k").Dot("appendTo").Call(jen.Id("b"), jen.Id("n"))),
	)
	jf.Line()

	jf.Comment("key returns the store key of k in the table's scratch buffer, valid until the")
	jf.Comment("table's next point operation. (KV does not retain the keys passed to it.)")
	jf.Func().Params(recv.Clone()).Id("key").Params(jen.Id("k").Id(keyT)).Index().Byte().Block(
		jen.Op("*").Id("t").Dot("buf").Op("=").Id("k").Dot("appendTo").Call(jen.Parens(jen.Op("*").Id("t").Dot("buf")).Index(jen.Empty(), jen.Lit(0)), jen.Lit(n)),
		jen.Return(jen.Op("*").Id("t").Dot("buf")),
	)
	jf.Line()

	jf.Comment("Get returns the row having key, and whether there is one.")
	jf.Func().Params(recv.Clone()).Id("Get").Params(jen.Id("key").Id(keyT)).Params(jen.Op("*").Id(row), jen.Bool(), jen.Error()).Block(
		jen.List(jen.Id("v"), jen.Id("found"), jen.Err()).Op(":=").Id("t").Dot("kv").Dot("Get").Call(jen.Id("t").Dot("key").Call(jen.Id("key"))),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.False(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"getting %v: %w"), jen.Id("key"), jen.Err())),
		).Else().If(jen.Op("!").Id("found")).Block(
			jen.Return(jen.Nil(), jen.False(), jen.Nil()),
		),
		jen.Id("r").Op(":=").New(jen.Id(row)),
		jen.If(jen.Err().Op(":=").Qual(pathCodec, "Unmarshal").Call(jen.Id("v"), jen.Id("r")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.False(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"decoding row %v: %w"), jen.Id("key"), jen.Err())),
		),
		restoreStmt(elided, jen.Id("key")),
		jen.Return(jen.Id("r"), jen.True(), jen.Nil()),
	)
	jf.Line()

	jf.Comment("Put stores row under the key of its key fields, replacing any row there.")
	jf.Func().Params(recv.Clone()).Id("Put").Params(jen.Id("row").Op("*").Id(row)).Error().Block(
		jen.Comment("The value, then the key, in the scratch buffer."),
		jen.List(jen.Id("b"), jen.Err()).Op(":=").Qual(pathCodec, "Append").Call(jen.Parens(jen.Op("*").Id("t").Dot("buf")).Index(jen.Empty(), jen.Lit(0)), jen.Id("row")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"encoding row: %w"), jen.Err())),
		),
		stripStmt(elided, errPrefix),
		jen.Id("nv").Op(":=").Len(jen.Id("b")),
		jen.Id("b").Op("=").Id("t").Dot("KeyOf").Call(jen.Id("row")).Dot("appendTo").Call(jen.Id("b"), jen.Lit(n)),
		jen.Op("*").Id("t").Dot("buf").Op("=").Id("b"),
		jen.If(jen.Err().Op(":=").Id("t").Dot("kv").Dot("Put").Call(jen.Id("b").Index(jen.Id("nv"), jen.Empty()), jen.Id("b").Index(jen.Empty(), jen.Id("nv"))), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"putting %v: %w"), jen.Id("t").Dot("KeyOf").Call(jen.Id("row")), jen.Err())),
		),
		jen.Return(jen.Nil()),
	)
	jf.Line()

	jf.Comment("Delete removes the row having key, if there is one.")
	jf.Func().Params(recv.Clone()).Id("Delete").Params(jen.Id("key").Id(keyT)).Error().Block(
		jen.If(jen.Err().Op(":=").Id("t").Dot("kv").Dot("Delete").Call(jen.Id("t").Dot("key").Call(jen.Id("key"))), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"deleting %v: %w"), jen.Id("key"), jen.Err())),
		),
		jen.Return(jen.Nil()),
	)
	jf.Line()

	fn := jen.Id("fn").Func().Params(jen.Op("*").Id(row)).Bool()
	jf.Comment("Scan calls fn with every row of the table in key order, until fn returns false.")
	jf.Func().Params(recv.Clone()).Id("Scan").Params(fn.Clone()).Error().Block(
		jen.Return(jen.Id("t").Dot("scan").Call(jen.Id(prefix), jen.Qual(pathKeyenc, "PrefixEnd").Call(jen.Id(prefix)), jen.Id("fn"))),
	)
	jf.Line()

	jf.Comment("ScanPrefix calls fn, in key order until it returns false, with every row whose")
	jf.Comment("first `fields` key fields equal those of key.")
	jf.Func().Params(recv.Clone()).Id("ScanPrefix").Params(jen.Id("key").Id(keyT), jen.Id("fields").Int(), fn.Clone()).Error().Block(
		jen.If(jen.Id("fields").Op("<").Lit(0).Op("||").Id("fields").Op(">").Lit(n)).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+fmt.Sprintf("scanning a prefix of %%d key fields, not within [0, %d]", n)), jen.Id("fields"))),
		),
		jen.Id("p").Op(":=").Id("t").Dot("encode").Call(jen.Id("key"), jen.Id("fields")),
		jen.Return(jen.Id("t").Dot("scan").Call(jen.Id("p"), jen.Qual(pathKeyenc, "PrefixEnd").Call(jen.Id("p")), jen.Id("fn"))),
	)
	jf.Line()

	jf.Comment("ScanRange calls fn, in key order until it returns false, with every row whose")
	jf.Comment("key is within [from, to).")
	jf.Func().Params(recv.Clone()).Id("ScanRange").Params(jen.List(jen.Id("from"), jen.Id("to")).Id(keyT), fn.Clone()).Error().Block(
		jen.Return(jen.Id("t").Dot("scan").Call(jen.Id("t").Dot("encode").Call(jen.Id("from"), jen.Lit(n)), jen.Id("t").Dot("encode").Call(jen.Id("to"), jen.Lit(n)), jen.Id("fn"))),
	)
	jf.Line()

	jf.Comment("scan calls fn with the rows of keys [start, end).")
	jf.Func().Params(recv.Clone()).Id("scan").Params(jen.List(jen.Id("start"), jen.Id("end")).Index().Byte(), fn.Clone()).Error().Block(
		jen.Var().Id("derr").Error(),
		jen.Err().Op(":=").Id("t").Dot("kv").Dot("Scan").Call(jen.Id("start"), jen.Id("end"), jen.Func().Params(jen.Id("kb"), jen.Id("v").Index().Byte()).Bool().Block(
			jen.Id("r").Op(":=").New(jen.Id(row)),
			jen.If(jen.Id("derr").Op("=").Qual(pathCodec, "Unmarshal").Call(jen.Id("v"), jen.Id("r")), jen.Id("derr").Op("!=").Nil()).Block(
				jen.Return(jen.False()),
			),
			scanRestore(elided, keyT),
			jen.Return(jen.Id("fn").Call(jen.Id("r"))),
		)),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"scanning: %w"), jen.Err())),
		).Else().If(jen.Id("derr").Op("!=").Nil()).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"decoding row: %w"), jen.Id("derr"))),
		),
		jen.Return(jen.Nil()),
	)
	jf.Line()
}

// restoreStmt returns the statement restoring the elided key fields of row r
// from key, if there are any.
func restoreStmt(elided []keyField, key jen.Code) jen.Code {
	if len(elided) == 0 {
		return jen.Null()
	}
	return jen.Add(key).Dot("restore").Call(jen.Id("r"))
}

// stripStmt returns the statement leaving the elided key fields out of the
// encoded row b, if there are any.
func stripStmt(elided []keyField, errPrefix string) jen.Code {
	if len(elided) == 0 {
		return jen.Null()
	}
	var nums []jen.Code
	for _, k := range elided {
		nums = append(nums, jen.Lit(int(k.field.Desc.Number())))
	}
	return jen.Comment("Key fields are in the key: the value leaves them out.").Line().
		If(jen.List(jen.Id("b"), jen.Err()).Op("=").Qual(pathCodec, "StripFields").Call(append([]jen.Code{jen.Id("b")}, nums...)...), jen.Err().Op("!=").Nil()).Block(
		jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(errPrefix+"encoding row: %w"), jen.Err())),
	)
}

// scanRestore returns the statements of a scan's callback restoring the
// elided key fields of row r from its store key kb, if there are any.
func scanRestore(elided []keyField, keyT string) jen.Code {
	if len(elided) == 0 {
		return jen.Null()
	}
	return jen.List(jen.Id("k"), jen.Err()).Op(":=").Id("decode"+keyT).Call(jen.Id("kb")).Line().
		If(jen.Err().Op("!=").Nil()).Block(
		jen.Id("derr").Op("=").Err(),
		jen.Return(jen.False()),
	).Line().
		Id("k").Dot("restore").Call(jen.Id("r"))
}
