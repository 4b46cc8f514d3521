#!/bin/bash
# Installs everything the demo and the tests need on Debian 12, as root:
# Debian packages, a Go toolchain new enough for go.mod, and the guest
# kernel the end-to-end suite boots. Safe to run again.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root" >&2
	exit 1
fi

# The 6.12 guest kernel comes from bookworm-backports: add that suite, on
# the mirror the machine already uses for bookworm, unless it is there.
# (Whole reads, no grep -q or awk exit: an early exit would break apt's pipe.)
if [ "$(apt-get indextargets --format '$(RELEASE)' | grep -cx bookworm-backports)" = 0 ]; then
	mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2 == "bookworm" && m == "" {m = $1} END {print m}')
	mirror=${mirror:-http://deb.debian.org/debian/}
	echo "install-deps: adding bookworm-backports ($mirror) to apt's sources"
	cat >/etc/apt/sources.list.d/bookworm-backports.sources <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	apt-get update -qq
fi

packages=(qemu-system-x86 busybox-static cpio kmod rdma-core ibverbs-providers ibverbs-utils
	rdmacm-utils perftest nvme-cli fio iproute2 e2fsprogs util-linux libibverbs-dev librdmacm-dev
	gcc libc6-dev git curl unzip ca-certificates xz-utils jq yq libcap2-bin dmsetup
	systemd prometheus # systemd-analyze and promtool check the shipped unit and alert rules
	ceph-mon ceph-osd ceph-common librbd-dev librados-dev # the rbd backend and its test cluster
	libgnutls28-dev gnutls-bin keyutils # NVMe/TCP's TLS handshake (package ktls), the client its tests run, keyctl
	libnl-genl-3-200 libglib2.0-0 libkeyutils1) # what Debian 13's tlshd (below) links
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Go: the version go.mod asks for, from the Go module proxy if the machine
# has none or an older one.
want=$(awk '/^go /{print $2}' "$repo/go.mod")
have=""
export PATH=/usr/local/go/bin:$PATH
if command -v go >/dev/null; then
	# GOTOOLCHAIN=local: report the installed Go, not one it would fetch for go.mod.
	have=$(GOTOOLCHAIN=local go env GOVERSION | sed 's/^go//')
fi
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
	toolchain=${NVMEOF_GO_TOOLCHAIN:-1.26.8}
	echo "install-deps: installing Go $toolchain (found '${have:-none}', need $want)"
	tmp=$(mktemp -d)
	curl -fsSL -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$toolchain.linux-amd64.zip"
	unzip -q "$tmp/go.zip" -d "$tmp"
	rm -rf /usr/local/go
	mv "$tmp/golang.org/toolchain@v0.0.1-go$toolchain.linux-amd64" /usr/local/go
	chmod +x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/* 2>/dev/null || true
	rm -rf "$tmp"
fi
(cd "$repo" && go mod download)

# The nvmet-cfs shim's tests (test/blktests) mount FUSE.
[ -e /dev/fuse ] || modprobe fuse

# tlshd, the Linux host's and kernel target's TLS handshake daemon, for the
# TLS scenario on the 6.12 guest: Debian 12 does not package it, Debian 13
# does (ktls-utils). Its package is fetched through a private apt state of
# the trixie suite and unpacked, not installed: it runs against Debian
# 12's GnuTLS and glibc, which it needs no newer than.
cache=${NVMEOF_TEST_CACHE:-/var/cache/nvmeof-tgt-test}
if [ ! -x "$cache/tlshd/usr/sbin/tlshd" ]; then
	echo "install-deps: fetching tlshd (ktls-utils) from Debian 13"
	apt_dir=$(mktemp -d)
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
	mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' | awk '$2 == "bookworm" && m == "" {m = $1} END {print m}')
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${mirror:-http://deb.debian.org/debian/} trixie main" >"$apt_dir/sources.list"
	apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache::Archives="$apt_dir/archives" -o APT::Sandbox::User=root)
	apt-get "${apt_opts[@]}" update -qq
	(cd "$apt_dir" && apt-get "${apt_opts[@]}" download ktls-utils >/dev/null)
	rm -rf "$cache/tlshd"
	mkdir -p "$cache"
	dpkg-deb -x "$apt_dir"/ktls-utils_*.deb "$cache/tlshd"
	rm -rf "$apt_dir"
	LD_BIND_NOW=1 "$cache/tlshd/usr/sbin/tlshd" -h >/dev/null 2>&1 || {
		echo "install-deps: Debian 13's tlshd does not run on this machine's libraries" >&2
		exit 1
	}
fi

# The guest kernels (6.1 and 6.12, see test/run-tests.sh) and their initramfs.
E2E_KERNEL=6.1 "$repo/test/vm/prepare.sh" >/dev/null
E2E_KERNEL=6.12 "$repo/test/vm/prepare.sh" >/dev/null
echo "install-deps: ready"
