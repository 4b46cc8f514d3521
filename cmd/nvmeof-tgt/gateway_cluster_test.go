package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/sirupsen/logrus"
)

// The gateway pair against a real single-node cluster (test/ceph/
// cluster.sh, as root), with two daemons in this process. Each daemon has
// a cluster connection of its own, as two processes would: connections
// are shared per conf path, and daemon B names the same file another way.
// NVMEOF_CEPH_ENV=DIR/env reuses a running cluster.

var gwCeph struct {
	once sync.Once
	dir  string
	env  map[string]string
	err  error
}

func gatewayCluster(t *testing.T) map[string]string {
	t.Helper()
	if p := os.Getenv("NVMEOF_CEPH_ENV"); p != "" {
		env, err := readEnvFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	for _, tool := range []string{"ceph-mon", "ceph-osd", "ceph", "rbd"} {
		if _, err := exec.LookPath(tool); err != nil || os.Geteuid() != 0 {
			if os.Getenv("NVMEOF_REQUIRE_TOOLS") != "" {
				t.Fatalf("%s is missing or not root; test/install-deps.sh installs ceph", tool)
			}
			t.Skipf("NOT RUN: needs %s and root for a Ceph cluster; test/run-tests.sh requires it", tool)
		}
	}
	gwCeph.once.Do(func() {
		gwCeph.dir, gwCeph.err = os.MkdirTemp("", "nvmeof-gw-ceph-")
		if gwCeph.err != nil {
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			gwCeph.err = err
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		script, _ := filepath.Abs("../../test/ceph/cluster.sh")
		if out, err := exec.Command(script, "start", gwCeph.dir, strconv.Itoa(port)).CombinedOutput(); err != nil {
			gwCeph.err = fmt.Errorf("cluster.sh start: %v\n%s", err, out)
			return
		}
		gwCeph.env, gwCeph.err = readEnvFile(filepath.Join(gwCeph.dir, "env"))
	})
	if gwCeph.err != nil {
		t.Fatal(gwCeph.err)
	}
	return gwCeph.env
}

// stopGatewayCluster stops the cluster gatewayCluster started; TestMain
// calls it.
func stopGatewayCluster() {
	if gwCeph.dir != "" {
		script, _ := filepath.Abs("../../test/ceph/cluster.sh")
		exec.Command(script, "stop", gwCeph.dir).Run()
		os.RemoveAll(gwCeph.dir)
	}
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env, sc.Err()
}

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
	d, err := start(cfg, logger)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	tick := time.NewTicker(50 * time.Millisecond)
	wrote := ""
	for {
		select {
		case <-sigs:
			d.stop(5 * time.Second)
			fmt.Println("stopped")
			return 0
		case <-tick.C:
		}
		st := d.gateway.runner(1).Status().State
		if st == gateway.Blocklisted && wrote == "" {
			ns := d.target.Subsystem("nqn.2026-11.io.example:gw").Namespace(1)
			err := ns.Backend.WriteAt(make([]byte, 512), 0)
			wrote = "ok"
			if err != nil {
				wrote = errors.Unwrap(err).(syscall.Errno).Error()
				if errors.Is(err, syscall.ESHUTDOWN) {
					wrote = "ESHUTDOWN"
				}
			}
		}
		fmt.Printf("state=%s ana=%s write=%s\n", st, d.target.Port(1).ANAState(1), wrote)
	}
}
