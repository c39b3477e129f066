//go:build !gazconsumer_novtproto

package codec

// noVTProto is set by the build tag gazconsumer_novtproto: vtproto's
// methods are then ignored.
const noVTProto = false
