package runtime_test

import (
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	pc "go.gazette.dev/core/consumer/protocol"
)

func TestCompleteShardSpec(t *testing.T) {
	var defaults = pc.ShardSpec{MinTxnDuration: time.Millisecond, MaxTxnDuration: time.Second, HotStandbys: 2}

	var bare = pc.ShardSpec{Id: "bare"}
	runtime.CompleteShardSpec(&bare, defaults)
	if bare.MinTxnDuration != time.Millisecond || bare.MaxTxnDuration != time.Second || bare.HotStandbys != 2 || bare.Id != "bare" {
		t.Errorf("completed %+v", bare)
	}
	var set = pc.ShardSpec{MinTxnDuration: 5 * time.Millisecond, MaxTxnDuration: time.Minute, HotStandbys: 1}
	runtime.CompleteShardSpec(&set, defaults)
	if set.MinTxnDuration != 5*time.Millisecond || set.MaxTxnDuration != time.Minute || set.HotStandbys != 1 {
		t.Errorf("a spec setting every default was changed: %+v", set)
	}
}
