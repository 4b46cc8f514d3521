package daemon

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/sirupsen/logrus"
)

const gatewayChildEnv = "NVMEOF_TGT_TEST_GATEWAY_CONFIG"

// gatewayChild runs in the child process (TestMain); it returns the exit
// status.
func gatewayChild(path string) int {
	listen = func(_ *fabrics.Target, p *fabrics.Port, _ *logrus.Entry) (portListener, error) {
		return &fakeListener{port: p}, nil
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	logger := logrus.New()
	logger.SetOutput(os.Stderr)
	d, err := Start(cfg, logger)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	tick := time.NewTicker(50 * time.Millisecond)
	for {
		select {
		case <-sigs:
			d.Stop(5 * time.Second)
			fmt.Println("stopped")
			return 0
		case <-tick.C:
		}
		st := d.gateway.runner(1).Status()
		fmt.Printf("state=%s ana=%s rebuilds=%d\n", st.State, d.target.Port(1).ANAState(1), st.Rebuilds)
	}
}
