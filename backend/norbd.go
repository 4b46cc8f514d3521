//go:build norbd

package backend

func init() {
	Register("rbd", func(Options) (Backend, error) { return nil, ErrNoRBD })
}
