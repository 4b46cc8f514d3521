package dist

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const unitFile = "nvmeof-tgt.service"

// The settings the daemon's behaviour relies on, as the unit states them.
var unitSettings = []string{
	"Type=notify",       // READY=1 ends the start
	"NotifyAccess=main", // only the daemon speaks for the unit
	"ExecReload=/usr/local/bin/nvmeof-tgt ctl reload", // fails when the file is rejected
	"WatchdogSec=30s",       // the main loop pings every 15 s
	"Restart=on-failure",    // includes a watchdog timeout
	"LimitMEMLOCK=infinity", // RDMA buffers are pinned
	"LimitCORE=0",           // no secrets in core dumps
}

func TestServiceUnitSettings(t *testing.T) {
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for _, want := range unitSettings {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("%s lacks %q", unitFile, want)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "DeviceAllow=") || strings.HasPrefix(l, "PrivateDevices=") || strings.HasPrefix(l, "ProtectClock=") {
			t.Errorf("%s: %q would hide /dev/infiniband and block devices from the daemon", unitFile, l)
		}
	}
}

// systemd-analyze verify prints every unknown key and bad value but exits
// 0 for them, so any output is a failure. The binary path is this test's
// own executable: verify checks that ExecStart= points at one.
func TestServiceUnitVerifies(t *testing.T) {
	analyze := needTool(t, "systemd-analyze", "systemd")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(b), "/usr/local/bin/nvmeof-tgt", self)
	if out := verifyUnit(t, analyze, unit); out != "" {
		t.Fatalf("systemd-analyze verify %s:\n%s", unitFile, out)
	}
	// The check itself catches a misspelt key.
	if out := verifyUnit(t, analyze, strings.Replace(unit, "WatchdogSec=", "WatchDogSec=", 1)); !strings.Contains(out, "WatchDogSec") {
		t.Fatalf("systemd-analyze verify let a misspelt key through: %q", out)
	}
}

func verifyUnit(t *testing.T, analyze, unit string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvmeof-tgt.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(analyze, "verify", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		out.WriteString(err.Error())
	}
	return out.String()
}
