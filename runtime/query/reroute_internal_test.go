package query

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The status of a call routed to a shard that no longer owns its key is
// told apart from other Unavailable ones, also once it crossed the wire (as
// its proto).
func TestNotOwnedStatus(t *testing.T) {
	var err = errNotOwned("ledger-00")
	if !notOwned(err) || status.Code(err) != codes.Unavailable {
		t.Fatalf("%v: not told as not owned", err)
	}
	var wire = status.FromProto(status.Convert(err).Proto()).Err()
	if !notOwned(wire) {
		t.Fatalf("%v, from its proto: not told as not owned", wire)
	}
	for _, other := range []error{nil, status.Error(codes.Unavailable, "shard ledger-00: no longer owns"), status.Error(codes.NotFound, "x")} {
		if notOwned(other) {
			t.Errorf("%v: told as not owned", other)
		}
	}
}
