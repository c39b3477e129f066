package gengc

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// keyGoType returns the Go type of the field of key field k in its key
// struct: that of its Go field in the open struct API (a pointer for a field
// with presence but of bytes or a message).
func keyGoType(fc *fileCtx, k keyField) jen.Code {
	f := k.field
	var t *jen.Statement
	switch f.Desc.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		t = jen.Int32()
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		t = jen.Int64()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		t = jen.Uint32()
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		t = jen.Uint64()
	case protoreflect.BoolKind:
		t = jen.Bool()
	case protoreflect.StringKind:
		t = jen.String()
	case protoreflect.BytesKind:
		return jen.Index().Byte()
	case protoreflect.EnumKind:
		t = fc.ident(f.Enum.GoIdent)
	case protoreflect.MessageKind, protoreflect.GroupKind: // A Timestamp, as checkKeyField checked.
		return jen.Op("*").Add(fc.q(pathTimestamp, "Timestamp"))
	default:
		panic(fmt.Sprintf("unsupported key field kind %v", f.Desc.Kind()))
	}
	if k.presence() {
		return jen.Op("*").Add(t)
	}
	return t
}

// keyFieldFunc returns the function of package table encoding and decoding
// key field k.
func keyFieldFunc(fc *fileCtx, k keyField) *jen.Statement {
	var name string
	switch k.field.Desc.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind, protoreflect.EnumKind:
		name = "Int"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		name = "Uint"
	case protoreflect.BoolKind:
		name = "Bool"
	case protoreflect.StringKind:
		name = "String"
	case protoreflect.BytesKind:
		name = "Bytes"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return fc.q(pathTable, "Timestamp")
	default:
		panic(fmt.Sprintf("unsupported key field kind %v", k.field.Desc.Kind()))
	}
	if k.presence() {
		name = "Optional" + name
	}
	return fc.q(pathTable, name)
}

// keyOfRow returns the expression of the value of key field k of row r.
func keyOfRow(fc *fileCtx, r jen.Code, k keyField) jen.Code {
	f := k.field
	switch {
	case !k.presence() || f.Desc.Kind() == protoreflect.MessageKind || f.Desc.Kind() == protoreflect.GroupKind:
		return get(r, f) // A Timestamp getter returns nil if it is not set.
	case !opaque(f):
		return jen.Add(r).Dot(f.GoName) // Nil if it is not set.
	case f.Desc.Kind() == protoreflect.BytesKind:
		return fc.q(pathTable, "PresentBytes").Call(jen.Add(r).Dot(methodOf(f, "Has")).Call(), get(r, f))
	}
	return fc.q(pathTable, "Present").Call(jen.Add(r).Dot(methodOf(f, "Has")).Call(), get(r, f))
}

// keyDoc describes the key of t, as "(a, b descending)".
func keyDoc(t *table) string {
	return "(" + strings.Join(keyNames(t), ", ") + ")"
}

// keyNames returns the names of the key fields of t, as a table.Def's Key.
func keyNames(t *table) []string {
	var out []string
	for _, k := range t.key {
		s := string(k.field.Desc.Name())
		if k.desc {
			s += " descending"
		}
		out = append(out, s)
	}
	return out
}

// elidedKey returns the key fields of t left out of stored values: those
// without field presence, whose zero value a row can't tell from unset, so
// that setting them back from the key restores the row exactly.
func elidedKey(t *table) []keyField {
	var out []keyField
	for _, k := range t.key {
		if !k.presence() {
			out = append(out, k)
		}
	}
	return out
}

// genTable generates the key type, table type, constructor and schema of
// table t.
func genTable(fc *fileCtx, t *table) {
	jf := fc.jf
	row := t.msg.GoIdent.GoName
	n := tableNamesOf(t)

	if len(elidedKey(t)) == len(t.key) {
		fc.doc("%s is the key of table %q, whose rows are %s messages ordered by %s.", n.key, t.name, row, keyDoc(t))
	} else {
		fc.doc("%s is the key of table %q, whose rows are %s messages ordered by %s. A field with presence is nil if it is not set, which orders before every value.", n.key, t.name, row, keyDoc(t))
	}
	var fields []jen.Code
	for _, k := range t.key {
		fields = append(fields, jen.Id(k.field.GoName).Add(keyGoType(fc, k)))
	}
	jf.Type().Id(n.key).Struct(fields...)
	jf.Line()

	rowT := jen.Op("*").Id(row)
	if t.timer {
		fc.doc("%s are the per-key timers of %s messages of a store, keyed by %s: Set, SetAfter, Cancel and Get a timer within a transaction. Their reads see the writes of the store's current transaction.", n.table, row, keyDoc(t))
		jf.Type().Id(n.table).Op("=").Add(fc.q(pathTable, "Timers")).Types(jen.Id(n.key), rowT.Clone())
		jf.Line()
		fc.doc("%s returns the %s timers of the store view kv.", n.ctor, row)
		jf.Func().Id(n.ctor).Params(jen.Id("kv").Add(fc.q(pathRuntime, "KV"))).Id(n.table).Block(
			jen.Return(jen.Id(n.schema).Dot("OpenTimers").Call(jen.Id("kv"))),
		)
		jf.Line()
	} else {
		fc.doc("%s is table %q of a store: %s rows ordered by %s. Its reads see the writes of the store's current transaction.", n.table, t.name, row, keyDoc(t))
		jf.Type().Id(n.table).Op("=").Add(fc.q(pathTable, "Table")).Types(jen.Id(n.key), rowT.Clone())
		jf.Line()
		fc.doc("%s returns table %q of the store view kv.", n.ctor, t.name)
		jf.Func().Id(n.ctor).Params(jen.Id("kv").Add(fc.q(pathRuntime, "KV"))).Id(n.table).Block(
			jen.Return(jen.Id(n.schema).Dot("Open").Call(jen.Id("kv"))),
		)
		jf.Line()
	}

	var names []jen.Code
	for _, s := range keyNames(t) {
		names = append(names, jen.Lit(s))
	}
	var keyOf, codec []jen.Code
	for _, k := range t.key {
		keyOf = append(keyOf, jen.Id(k.field.GoName).Op(":").Add(keyOfRow(fc, jen.Id("r"), k)))
		dir := fc.q(pathKeyenc, "Ascending")
		if k.desc {
			dir = fc.q(pathKeyenc, "Descending")
		}
		codec = append(codec, keyFieldFunc(fc, k).Call(jen.Id("c"), jen.Op("&").Id("k").Dot(k.field.GoName), dir))
	}
	def := []jen.Code{
		jen.Id("Name").Op(":").Lit(t.name),
		jen.Id("Key").Op(":").Index().String().Values(names...),
		jen.Id("KeyOf").Op(":").Func().Params(jen.Id("r").Add(rowT.Clone())).Id(n.key).Block(
			jen.Return(jen.Id(n.key).Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: len(keyOf) > 1}, keyOf...)),
		),
		jen.Id("Fields").Op(":").Func().Params(jen.Id("k").Op("*").Id(n.key), jen.Id("c").Op("*").Add(fc.q(pathTable, "Codec"))).Block(codec...),
	}
	if elided := elidedKey(t); len(elided) != 0 {
		var restore, nums []jen.Code
		for _, k := range elided {
			v := jen.Id("k").Dot(k.field.GoName)
			if k.field.Desc.Kind() == protoreflect.BytesKind {
				v = jen.Append(jen.Index().Byte().Parens(jen.Nil()), v.Op("..."))
			}
			restore = append(restore, set(jen.Id("r"), k.field, v))
			nums = append(nums, jen.Lit(int(k.field.Desc.Number())))
		}
		def = append(def,
			jen.Id("Restore").Op(":").Func().Params(jen.Id("k").Op("*").Id(n.key), jen.Id("r").Add(rowT.Clone())).Block(restore...),
			jen.Id("Elided").Op(":").Index().Add(fc.q(pathProtowire, "Number")).Values(nums...),
		)
	}
	if t.ttl != 0 {
		def = append(def, jen.Id("TTL").Op(":").Add(durationExpr(fc, t.ttl)))
	}
	fc.doc("%s is the schema of table %q.", n.schema, t.name)
	jf.Var().Id(n.schema).Op("=").Add(fc.q(pathTable, "NewSchema")).Call(
		fc.q(pathTable, "Def").Types(jen.Id(n.key), rowT.Clone()).Custom(multiLine, def...),
	)
	jf.Line()
}
