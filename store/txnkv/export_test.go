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
