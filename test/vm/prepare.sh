#!/bin/bash
# Prepares the test guest: unpacks the current Debian 6.1 kernel package
# (never installed, only unpacked) into the cache and builds an initramfs
# that mounts this machine's root over 9p. Prints the shell variables
# run-guest.sh needs. Work already done is skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${NVMEOF_TEST_CACHE:-/var/cache/nvmeof-tgt-test}

# Resolve the ABI from the meta package rather than pinning it: security
# updates move it.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$pkg" ]; then
	echo "prepare: cannot resolve linux-image-amd64 (run apt-get update)" >&2
	exit 1
fi
kver=${pkg#linux-image-}
kdir=$cache/$kver
if [ ! -f "$kdir/.unpacked" ]; then
	echo "prepare: fetching $pkg" >&2
	mkdir -p "$kdir"
	tmp=$(mktemp -d)
	(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1)
	dpkg-deb -x "$tmp"/*.deb "$kdir/root"
	rm -rf "$tmp"
	depmod -b "$kdir/root" "$kver"
	touch "$kdir/.unpacked"
fi
modroot=$kdir/root/lib/modules/$kver

# Rebuild the initramfs when its init script changes.
sum=$(sha256sum "$here/init" | cut -c1-16)
initrd=$kdir/initrd-$sum.gz
if [ ! -f "$initrd" ]; then
	echo "prepare: building initramfs" >&2
	tmp=$(mktemp -d)
	mkdir -p "$tmp/bin" "$tmp/mods"
	cp /bin/busybox "$tmp/bin/busybox"
	cp "$here/init" "$tmp/init"
	chmod 755 "$tmp/init"
	i=0
	for m in virtio_pci virtio_net 9pnet_virtio 9p overlay; do
		modprobe -d "$kdir/root" -S "$kver" --show-depends "$m"
	done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' | while read -r ko; do
		i=$((i + 1))
		cp "$ko" "$tmp/mods/$(printf %02d "$i")-$(basename "$ko")"
	done
	(cd "$tmp" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.tmp"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$tmp"
fi
echo "KVER=$kver"
echo "KERNEL=$kdir/root/boot/vmlinuz-$kver"
echo "MODULES=$modroot"
echo "INITRD=$initrd"
