// Package cephtest gives tests a real single-node Ceph cluster, the one
// cluster.sh in this directory makes: one monitor, one BlueStore OSD, cephx
// on, and an RBD user limited to one pool.
//
// NVMEOF_CEPH_ENV=DIR/env names a cluster that test binaries share: the
// first test of any of them that asks starts it in DIR, unless it is there
// already, and it outlives them (test/run-tests.sh gives one empty DIR to
// every package of a run, and stops the cluster after). Without the
// variable, the first test that asks starts a cluster for its test binary
// alone, which TestMain stops with Stop.
//
// Tests of several packages may use one cluster at once. A test that takes
// the OSD down holds the cluster alone (Exclusive); the others hold it
// shared (Use), so none of them sees another's outage.
package cephtest
