// Package e2e is the end-to-end suite: it boots a QEMU guest with
// soft-RoCE (test/vm), runs nvmeof-tgt inside it and drives it with the
// guest's Linux NVMe host, nvme-cli and fio. Each scenario is a shell
// script in scenarios/; the guest runs them all in one boot and each
// becomes a subtest here.
//
// Run it as root with the e2e build tag:
//
//	go test -tags e2e -v -timeout 30m ./test/e2e/
//
// E2E_ONLY=regexp limits the scenarios; E2E_KEEP=1 keeps the results
// directory; E2E_KERNEL=6.1 (the default) or 6.12 picks the guest kernel
// (test/vm/prepare.sh; test/run-tests.sh runs every scenario on 6.1 and a
// subset on 6.12). NVMEOF_E2E_TARGET=kernel runs the scenarios against the Linux
// kernel target (nvmet-rdma, configured from the same YAML files by
// test/vm/kernel-target.sh) instead of nvmeof-tgt, to check the suite
// itself; scenarios about nvmeof-tgt's own features are skipped there.
package e2e
