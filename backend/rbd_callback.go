//go:build !norbd && cgo

package backend

/*
#include <stdint.h>
#include <rbd/librbd.h>
*/
import "C"

import "unsafe"

// rbdAioDone completes an asynchronous librbd operation: arg is what
// asyncArg packed, the sink and the tag.
//
//export rbdAioDone
func rbdAioDone(c C.rbd_completion_t, arg unsafe.Pointer) {
	res := int64(C.rbd_aio_get_return_value(c))
	C.rbd_aio_release(c)
	completeAsync(uint64(uintptr(arg)), res)
}
