package schemacheck

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// keyType is what the stored key of a field holds: its encoding (keyenc's
// int, uint, bool, string, bytes or timestamp, or an enum's numbers) and,
// for integers, the width of the Go value it decodes into.
type keyType struct {
	encoding string
	bits     int
}

// keyTypeOf returns the keyType of fd. Types no key may have (which the
// generator refuses) are their own encoding.
func keyTypeOf(fd protoreflect.FieldDescriptor) keyType {
	if fd == nil || fd.IsList() || fd.IsMap() {
		return keyType{encoding: typeName(fd)}
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return keyType{"int", 32}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return keyType{"int", 64}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return keyType{"uint", 32}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return keyType{"uint", 64}
	case protoreflect.BoolKind:
		return keyType{"bool", 0}
	case protoreflect.StringKind:
		return keyType{"string", 0}
	case protoreflect.BytesKind:
		return keyType{"bytes", 0}
	case protoreflect.EnumKind:
		return keyType{"enum " + string(fd.Enum().FullName()), 0}
	case protoreflect.MessageKind:
		if fd.Message().FullName() == "google.protobuf.Timestamp" {
			return keyType{"timestamp", 0}
		}
	}
	return keyType{encoding: typeName(fd)}
}

// keyChange explains why stored keys of a field of type from can't be read
// as a field of type to, or returns "" if every stored key decodes, byte for
// byte and value for value, the same: types of one encoding whose Go value
// is as wide or wider (int32, sint32 and sfixed32 to int64, sint64 or
// sfixed64; uint32 and fixed32 to uint64 or fixed64).
func keyChange(from, to protoreflect.FieldDescriptor) string {
	a, b := keyTypeOf(from), keyTypeOf(to)
	switch {
	case a.encoding == b.encoding && b.bits >= a.bits:
		return ""
	case a.encoding == b.encoding:
		return fmt.Sprintf("stored keys hold %d-bit values, which the new %s field truncates", a.bits, typeName(to))
	case a.bits != 0 && b.bits != 0:
		return fmt.Sprintf("stored keys encode %s values, which decode wrongly or not at all as %s", typeName(from), typeName(to))
	case a.encoding == "int" && from.Kind() != protoreflect.EnumKind && to.Kind() == protoreflect.EnumKind,
		from.Kind() == protoreflect.EnumKind && (to.Kind() == protoreflect.EnumKind || b.encoding == "int"):
		// Enums are keyed by their numbers, as integers.
		return fmt.Sprintf("stored keys hold %s numbers, which the new key takes for %s values", typeName(from), typeName(to))
	default:
		return fmt.Sprintf("stored keys encode %s values, which the new key neither matches nor decodes", typeName(from))
	}
}

// wireClass groups the kinds whose values protobuf reads back from each
// other's wire encoding (its "Updating a message type" rules): int32, int64,
// uint32, uint64, bool and enums; sint32 and sint64; fixed32 and sfixed32;
// fixed64 and sfixed64; string and bytes; a message only as itself.
func wireClass(fd protoreflect.FieldDescriptor) string {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.BoolKind, protoreflect.EnumKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "bytes"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return fd.Kind().String() + " " + string(fd.Message().FullName())
	}
	return fd.Kind().String() // float, double.
}

// wireCompatible reports whether values of field from, as stored, read
// back as field to.
func wireCompatible(from, to protoreflect.FieldDescriptor) bool {
	switch {
	case from.IsMap() != to.IsMap() || from.IsList() != to.IsList():
		return false
	case from.IsMap():
		return wireCompatible(from.MapKey(), to.MapKey()) && wireCompatible(from.MapValue(), to.MapValue())
	}
	return wireClass(from) == wireClass(to)
}
