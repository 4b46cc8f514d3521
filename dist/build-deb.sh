#!/bin/bash
# Builds the Debian package nvmeof-tgt_VERSION_ARCH.deb into OUTDIR (the
# current directory by default) and prints its path:
#
#   dist/build-deb.sh [OUTDIR]
#
# It holds the daemon in /usr/bin, this directory's unit in
# /lib/systemd/system (with its paths changed from /usr/local/bin to
# /usr/bin), the alert rules, scrape job and dashboard in
# /usr/share/nvmeof-tgt, config/examples/single-file.yaml as the conffile
# /etc/nvmeof-tgt/config.yaml (the unit's and the daemon's default path)
# and every example in /usr/share/doc/nvmeof-tgt/examples.
#
# The binary is built as the README builds it (CGO_ENABLED=1, stamped with
# git describe); Depends lists the package of every library the binary
# links, Recommends Ceph's client libraries where it has rbd
# (GOFLAGS=-tags=norbd leaves it out). NVMEOF_TGT_BINARY=PATH packages that binary instead of
# building one (the end-to-end harness packages the one it tests).
# DPKG_DEB_COMPRESSOR_TYPE (dpkg-deb's own) picks the compression.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)

# The binary's stamp, as the README's build command makes it; a Debian
# version must start with a digit and has no '-' without a revision:
# v1.2.0-3-gabc1234-dirty is 1.2.0+3.gabc1234.dirty, and a checkout with
# no tag gives 0~gabc1234 (before any tagged release).
describe=$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || true)
if [ -z "$describe" ]; then
	version=0~devel
elif git -C "$repo" describe --tags --abbrev=0 >/dev/null 2>&1; then
	version=$(echo "${describe#v}" | sed 's/-/+/; s/-/./g')
else
	version=0~g${describe//-/.}
fi
arch=$(dpkg --print-architecture)
deb=$out/nvmeof-tgt_${version}_${arch}.deb

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
install -d -m 0755 "$root"
bin=${NVMEOF_TGT_BINARY:-}
if [ -z "$bin" ]; then
	bin=$tmp/nvmeof-tgt
	(cd "$repo" && CGO_ENABLED=1 go build -ldflags "-X main.version=$describe" -o "$bin" ./cmd/nvmeof-tgt)
fi

# The package of each library the binary names (not ldd's whole closure:
# those come with the packages). dpkg knows a file under the path its
# package ships, which is /usr/lib or /lib for the same file on a merged
# /usr: ask for both, in one query (each takes a read of every file list).
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
libs=$(ldd "$bin")
paths=()
for lib in $needed; do
	path=$(awk -v l="$lib" '$1 == l && $2 == "=>" {print $3}' <<<"$libs")
	[ -n "$path" ] || { echo "build-deb: $bin needs $lib, which ldd does not find" >&2; exit 1; }
	paths+=("/usr${path#/usr}" "${path#/usr}")
done
owners=$([ ${#paths[@]} = 0 ] || dpkg-query -S "${paths[@]}" 2>/dev/null || true)
depends=()
for lib in $needed; do
	# libibverbs1:amd64: /usr/lib/x86_64-linux-gnu/libibverbs.so.1
	pkg=$(awk -v l="/$lib" 'substr($NF, length($NF) - length(l) + 1) == l {sub(/:.*/, "", $1); print $1; exit}' <<<"$owners")
	[ -n "$pkg" ] || { echo "build-deb: no installed package holds $lib: the package could not say what it needs" >&2; exit 1; }
	depends+=("$pkg")
done
depends=$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, | sed 's/,/, /g')

install -D -m 0755 "$bin" "$root/usr/bin/nvmeof-tgt"
install -d -m 0755 "$root/lib/systemd/system"
sed 's|/usr/local/bin/nvmeof-tgt|/usr/bin/nvmeof-tgt|g' "$repo/dist/nvmeof-tgt.service" >"$root/lib/systemd/system/nvmeof-tgt.service"
chmod 0644 "$root/lib/systemd/system/nvmeof-tgt.service"
for f in nvmeof-tgt-alerts.yml prometheus-scrape.yml grafana-dashboard.json; do
	install -D -m 0644 "$repo/dist/$f" "$root/usr/share/nvmeof-tgt/$f"
done
# 0600: a configuration may hold DH-HMAC-CHAP secrets.
install -D -m 0600 "$repo/config/examples/single-file.yaml" "$root/etc/nvmeof-tgt/config.yaml"
install -D -m 0644 "$repo/LICENSE" "$root/usr/share/doc/nvmeof-tgt/copyright"
install -D -m 0644 -t "$root/usr/share/doc/nvmeof-tgt/examples" "$repo"/config/examples/*.yaml

install -d -m 0755 "$root/DEBIAN"
echo /etc/nvmeof-tgt/config.yaml >"$root/DEBIAN/conffiles"
{
	echo "Package: nvmeof-tgt"
	echo "Version: $version"
	echo "Architecture: $arch"
	# Whoever builds it, as dch has it: DEBFULLNAME and DEBEMAIL.
	echo "Maintainer: ${DEBFULLNAME:-$(id -un)} <${DEBEMAIL:-$(id -un)@$(hostname -f 2>/dev/null || hostname)}>"
	echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
	[ -z "$depends" ] || echo "Depends: $depends"
	# rdma-core loads the RDMA modules at boot, ibverbs-providers holds
	# the NICs' user-space drivers; an NVMe/TCP-only machine needs neither.
	# A build with rbd loads Ceph's client libraries when it first
	# connects to a cluster (backend/ceph_dl.c): only a machine that
	# serves RBD images needs them.
	recommends="rdma-core, ibverbs-providers"
	! grep -qa librbd.so.1 "$bin" || recommends+=", librados2, librbd1"
	echo "Recommends: $recommends"
	echo "Section: net"
	echo "Priority: optional"
	echo "Homepage: https://github.com/nvmeof-tgt/nvmeof-tgt"
	echo "Description: NVMe over Fabrics target daemon (RDMA and NVMe/TCP)"
	echo " Serves files, block devices and RBD images to NVMe-oF hosts over RDMA"
	echo " and NVMe/TCP, configured by one YAML file and changed live with"
	echo " systemctl reload or nvmeof-tgt ctl."
} >"$root/DEBIAN/control"

# The example names an address to edit: starting the unit before that
# would fail, so installing only makes systemd see the unit. An upgrade
# leaves the running daemon alone, since a restart drops every host's
# path for a moment; `systemctl restart nvmeof-tgt` runs the new binary.
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
fi
EOF
cat >"$root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop nvmeof-tgt.service
fi
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
fi
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"

dpkg-deb --build --root-owner-group "$root" "$deb" >/dev/null
echo "$deb"
