package devstack

// SetChooseEtcdPort replaces how Start chooses etcd's port until restore is
// called.
func SetChooseEtcdPort(choose func() (int, error)) (restore func()) {
	var prev = chooseEtcdPort
	chooseEtcdPort = choose
	return func() { chooseEtcdPort = prev }
}
