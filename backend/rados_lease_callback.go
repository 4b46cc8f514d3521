//go:build !norbd && cgo

package backend

/*
#include <stdint.h>
*/
import "C"

// leaseNotified is a lease watch's callback (rados_lease.go), on
// librados' thread.
//
//export leaseNotified
func leaseNotified(arg C.uintptr_t) { leaseNotifiedGo(uintptr(arg)) }
