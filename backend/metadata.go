package backend

// ImageMetadata is a backend whose image keeps named values beside its
// data that several daemons can update safely: rbd's image metadata.
type ImageMetadata interface {
	// Metadata returns key's value, nil if it is not set.
	Metadata(key string) ([]byte, error)
	// CompareAndSetMetadata sets key to value only if it still holds old
	// (nil: not set), in one operation with the compare; an error wrapping
	// syscall.ECANCELED if it does not. The value is stored when it
	// returns.
	CompareAndSetMetadata(key string, old, value []byte) error
	// ImageID is the image's own ID, which a clone, a copy or a migrated
	// image does not share with the image it came from, though they copy
	// its metadata.
	ImageID() (string, error)
}
