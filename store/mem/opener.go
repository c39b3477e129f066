package mem

import (
	"sync"

	"github.com/gazconsumer/gazconsumer/runtime"
	pc "go.gazette.dev/core/consumer/protocol"
)

// Opener opens the stores of shards, each on a DB of its own kept for the
// life of the Opener: it implements runtime.StoreOpener. A shard's store
// opened again (after its shard failed, or moved away and back) resumes
// from its last commit. The zero value is ready to use.
type Opener struct {
	mu  sync.Mutex
	dbs map[pc.ShardID]*DB
}

var _ runtime.StoreOpener = (*Opener)(nil)

// OpenStore opens a Store on the DB of shard. The store keeps no files:
// the Recorder is not used.
func (o *Opener) OpenStore(shard runtime.Shard, _ runtime.Recorder) (runtime.Store, error) {
	return Open(o.DB(shard.Spec().Id)), nil
}

// DB returns the DB of shard id, creating it if need be.
func (o *Opener) DB(id pc.ShardID) *DB {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dbs == nil {
		o.dbs = make(map[pc.ShardID]*DB)
	}
	var db, ok = o.dbs[id]
	if !ok {
		db = NewDB()
		o.dbs[id] = db
	}
	return db
}
