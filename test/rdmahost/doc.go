// Package rdmahost is a raw NVMe-oF RDMA host for tests: it connects queue
// pairs to a target through rdma_cm with the NVMe-oF private data, sends
// command capsules and reads response capsules, and can leave a queue pair
// in ways the Linux host never does: with commands in flight and no
// disconnect (Abandon), without a Connect command, with more commands
// than its queue holds (Flood), or with responses it never receives
// (StopReceiving), for large transfers that all use one buffer (Options).
//
// The capsule encoding (encode.go) is plain Go and unit-tested anywhere;
// the verbs part (conn.go, host.c) needs an RDMA device and runs in the
// e2e guest, over soft-RoCE (test/rdmahost/cmd/rdmahost, scenario
// 81-churn, and the TestGuest tests of package rdma). The command's hold
// mode is a hostile host that runs until killed, holding what it can.
package rdmahost
