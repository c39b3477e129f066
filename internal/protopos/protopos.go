// Package protopos gives positions in .proto files, as gazconsumer's errors
// cite them (file.proto:line:col): of declarations, and of the statements
// setting the gazconsumer options of messages, services and rpcs, down to
// the element of a repeated option field.
package protopos

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// Position is a position in a .proto file.
type Position struct {
	// File is the path of the file, as imported.
	File string
	// Line and Col are 1-based.
	Line, Col int
}

// String returns "file:line:col".
func (p Position) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Errorf returns an error positioned at p: "file:line:col: message".
func Errorf(p Position, format string, args ...any) error {
	return fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...))
}

// Of returns the position of the declaration of d (line 1, column 1 of its
// file if the file has no source info).
func Of(d protoreflect.Descriptor) Position {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	return Position{d.ParentFile().Path(), loc.StartLine + 1, loc.StartColumn + 1}
}

// Declared returns the position of the declaration of d, and false if its
// file records no source info of it (where Of says line 1, column 1).
func Declared(d protoreflect.Descriptor) (Position, bool) {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	if len(loc.Path) == 0 {
		return Position{}, false
	}
	return Position{d.ParentFile().Path(), loc.StartLine + 1, loc.StartColumn + 1}, true
}

// Recorded returns the position of the first statement that d's file
// records at path within d's declaration (field numbers of d's descriptor,
// e.g. MessageOptionsField and an option's extension number) or under it,
// as an option set field by field is recorded by its fields; and false if
// there is none, or the file records no source info of d.
func Recorded(d protoreflect.Descriptor, path ...int32) (Position, bool) {
	locs := d.ParentFile().SourceLocations()
	own := locs.ByDescriptor(d).Path
	if len(own) == 0 {
		return Position{}, false
	}
	want := append(slices.Clone(own), path...)
	for i := 0; i < locs.Len(); i++ {
		if loc := locs.Get(i); len(loc.Path) >= len(want) && slices.Equal(loc.Path[:len(want)], want) {
			return Position{d.ParentFile().Path(), loc.StartLine + 1, loc.StartColumn + 1}, true
		}
	}
	return Position{}, false
}

// Field numbers of the options of descriptors, in descriptor.proto.
const (
	// MessageOptionsField is DescriptorProto.options.
	MessageOptionsField = 7
	// ServiceOptionsField is ServiceDescriptorProto.options.
	ServiceOptionsField = 3
	// MethodOptionsField is MethodDescriptorProto.options.
	MethodOptionsField = 4
)

// Option returns the position of the gazconsumer option of d, a message
// ((gazconsumer.v1.message)) or a service ((gazconsumer.v1.consumer)), at
// path within the option: see Ext. Of another descriptor, it is Of(d).
func Option(d protoreflect.Descriptor, path ...int32) Position {
	switch d.(type) {
	case protoreflect.MessageDescriptor:
		return Ext(d, MessageOptionsField, int32(gcv1.E_Message.Field), path...)
	case protoreflect.ServiceDescriptor:
		return Ext(d, ServiceOptionsField, int32(gcv1.E_Consumer.Field), path...)
	}
	return Of(d)
}

// Ext returns the position of extension ext of the options of d (field
// optsField of d's descriptor) at path within the extension (field numbers,
// each followed by an index if the field is repeated): that of the
// statement setting the deepest field of path that the source records (an
// option given as a message literal is recorded as a whole, one given field
// by field by each field), or else that of d.
func Ext(d protoreflect.Descriptor, optsField, ext int32, path ...int32) Position {
	locs := d.ParentFile().SourceLocations()
	want := append(protoreflect.SourcePath(nil), locs.ByDescriptor(d).Path...)
	want = append(want, optsField, ext)
	base := len(want)
	want = append(want, path...)
	var best []protoreflect.SourceLocation
	bestLen := -1
	for i := 0; i < locs.Len(); i++ {
		loc := locs.Get(i)
		n := len(loc.Path)
		if n < base || n > len(want) || !slices.Equal(loc.Path, want[:n]) || n < bestLen {
			continue
		}
		if n > bestLen {
			best, bestLen = nil, n
		}
		best = append(best, loc)
	}
	if len(best) == 0 {
		return Of(d)
	}
	loc := best[0]
	// Statements setting a repeated field element by element are recorded
	// under the field's path, without an index: the index-th is the one.
	if bestLen < len(want) && bestLen > base && len(best) > 1 {
		if i := int(want[bestLen]); i < len(best) {
			loc = best[i]
		}
	}
	return Position{d.ParentFile().Path(), loc.StartLine + 1, loc.StartColumn + 1}
}
