package gengc

import (
	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// withReadsAhead returns in, the runtime.Input of handler h of consumer c,
// read ahead (runtime.ReadsAhead) by the keys of the rows its message likely
// reads: of each table of c in the file's package whose every key field is
// a field of the message of the same name and type, the row of the
// message's values of those fields. A shard reads those rows of a batch of
// messages in one MultiGet before handling them. It is a guess: a row read
// ahead that the handler doesn't read costs a read, never a wrong answer.
func withReadsAhead(fc *fileCtx, c *consumer, h handler, in *jen.Statement) *jen.Statement {
	var body []jen.Code
	for _, t := range c.tables {
		if t.timer || string(t.msg.GoIdent.GoImportPath) != fc.path {
			continue // Another package's schema is unexported.
		}
		var fields []jen.Code
		for _, k := range t.key {
			f := fieldNamed(h.method.Input, k.field.Desc.Name())
			if f == nil || !sameKeyType(k.field, f) {
				fields = nil
				break
			}
			fields = append(fields, jen.Id(k.field.GoName).Op(":").Add(keyOfRow(fc, jen.Id("msg"), keyField{field: f, desc: k.desc})))
		}
		if len(fields) == 0 {
			continue
		}
		n := tableNamesOf(t)
		body = append(body, jen.Id(n.schema).Dot("Prefetch").Call(jen.Id("p"),
			jen.Id(n.key).Custom(jen.Options{Open: "{", Close: "}", Separator: ",", Multi: len(fields) > 1}, fields...)))
	}
	if len(body) == 0 {
		return in
	}
	return fc.q(pathRuntime, "ReadsAhead").Call(in, jen.Func().Params(
		jen.Id("msg").Op("*").Add(fc.ident(h.method.Input.GoIdent)), jen.Id("p").Op("*").Add(fc.q(pathRuntime, "Prefetch")),
	).Block(body...))
}

// fieldNamed returns the field of m named name, or nil.
func fieldNamed(m *protogen.Message, name protoreflect.Name) *protogen.Field {
	for _, f := range m.Fields {
		if f.Desc.Name() == name {
			return f
		}
	}
	return nil
}

// sameKeyType reports whether f, a field of a message, holds what key
// field k of a table does, in a value of the same Go type: a singular field
// outside of a oneof, of the same kind and presence, and enum or message.
func sameKeyType(k, f *protogen.Field) bool {
	kd, fd := k.Desc, f.Desc
	if fd.IsList() || fd.IsMap() || fd.Kind() != kd.Kind() || fd.HasPresence() != kd.HasPresence() {
		return false
	} else if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return false
	}
	switch kd.Kind() {
	case protoreflect.EnumKind:
		return fd.Enum().FullName() == kd.Enum().FullName()
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return fd.Message().FullName() == kd.Message().FullName()
	}
	return true
}
