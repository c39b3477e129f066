package txnkv

// Written reports whether the store has handed to its Base a commit not yet
// known to be durable.
func Written(s *Store) bool {
	s.shared.RLock()
	defer s.shared.RUnlock()
	for _, c := range s.written {
		select {
		case <-c.durable:
		default:
			return true
		}
	}
	return false
}

// CollideKeys has overlays hash keys to the length of the key modulo n, so
// that most keys collide, until the returned func restores the hash.
func CollideKeys(n int) (restore func()) {
	var prev = hashKey
	hashKey = func(key []byte) uint64 { return uint64(len(key) % n) }
	return func() { hashKey = prev }
}

// Indexed reports whether the overlay has built its index.
func Indexed(o *Overlay) bool { return o.index != nil }
