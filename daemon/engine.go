package daemon

import (
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend/uring"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

// probeIOURing is uring.Probe; tests stand in a kernel without io_uring.
var probeIOURing = uring.Probe

// chooseEngine turns the configuration's io_engine into the engine to run:
// auto takes io_uring where the kernel allows it and says why not where it
// does not; io_uring asked for by name must work, or the daemon does not
// start.
func chooseEngine(want string, log *logrus.Entry) (fabrics.IOEngine, error) {
	if want == "threads" {
		return fabrics.EngineThreads, nil
	}
	err := probeIOURing()
	switch {
	case err == nil:
		return fabrics.EngineIOURing, nil
	case want == "io_uring":
		return 0, fmt.Errorf("io_engine: io_uring cannot be used on this kernel (%w); set io_engine: threads or auto", err)
	}
	log.WithError(err).Warn("io_uring cannot be used on this kernel; file and block I/O runs on worker threads")
	return fabrics.EngineThreads, nil
}
