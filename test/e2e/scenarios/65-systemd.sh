# The Debian package (dist/build-deb.sh) under a real systemd: systemd
# 252 runs as PID 1 of a new PID and mount namespace (the guest's own PID
# 1 is the test harness). `dpkg -i` reloads systemd and starts nothing;
# `systemctl start` returns once the daemon says READY=1; a host writes
# and reads; `systemctl reload` succeeds on a good file (RELOADING=1,
# then READY=1) and fails on a broken one while the daemon keeps serving;
# the watchdog hears pings; `dpkg -r` stops it cleanly.
daemon_only "runs nvmeof-tgt's own systemd unit"
[ -n "${NVMEOF_TGT_DEB:-}" ] || fail "the harness passed no NVMEOF_TGT_DEB (dist/build-deb.sh failed?)"
unit=/lib/systemd/system/nvmeof-tgt.service
nqn=nqn.2026-11.io.example:systemd
sdlog=$RESULTS/$SCENARIO-target.log # the unit's journal

# This systemd boots nothing but what the test starts: no sysinit.target
# (udev, mounts, ... belong to the guest's harness) and no network wait.
mkdir -p /etc/systemd/system/nvmeof-tgt.service.d
# A 6 s watchdog rather than the unit's 30 s: the first ping is due at
# half of it, and the scenario waits for one.
printf '[Unit]\nDefaultDependencies=no\n[Service]\nWatchdogSec=6\n' >/etc/systemd/system/nvmeof-tgt.service.d/e2e.conf
# journald, for systemd's debug log: the unit only orders itself after it.
printf '[Unit]\nDescription=end-to-end test\nWants=systemd-journald.socket systemd-journald.service\n' >/etc/systemd/system/e2e.target
ln -sf /dev/null /etc/systemd/system/network-online.target
# No generators either (fstab, getty, sysv, ...): they run again at each
# daemon-reload, which the package's scripts do, and took 6 s of one.
mkdir -p /etc/systemd/system-generators
for g in /lib/systemd/system-generators/*; do ln -sf /dev/null "/etc/systemd/system-generators/${g##*/}"; done
good() {
	config /etc/nvmeof-tgt/config.yaml <<CFG
metrics: {address: 127.0.0.1:9750}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    allow_any_host: true
    namespaces:
      - {nsid: 1, backend: file, path: /data/$SCENARIO.img, size: 64MiB}
$1
CFG
}

# systemd as PID 1 of its own namespaces, with cgroup v2 and a /run of its
# own. Its debug log, which names every notification it gets, goes to the
# journal once journald runs (e2e.target starts it). Before that
# it would write to the console, reopened per message and only if it is a
# terminal: a plain file there keeps the guest's serial line quiet.
# (With /dev/null there, the guest's kernel soft-locked in systemd and
# nsenter in one run.)
: >"$RESULTS/$SCENARIO-console.log"
unshare --pid --fork --mount --propagation private --mount-proc bash -c '
	mount -t cgroup2 cgroup2 /sys/fs/cgroup && mount -t tmpfs tmpfs /run &&
	mount --bind "$1" /dev/console &&
	exec env container=e2e /usr/lib/systemd/systemd --system --unit=e2e.target \
		--log-target=journal --log-level=debug' _ "$RESULTS/$SCENARIO-console.log" >"$RESULTS/$SCENARIO-unshare.log" 2>&1 &
ns_parent=$!
sd=""
stop_systemd() {
	[ -n "$sd" ] && kill -9 "$sd" 2>/dev/null
	wait "$ns_parent" 2>/dev/null || true
	cleanup
}
trap stop_systemd EXIT
# heard PATTERN: wait (10 s at most) until systemd logged a notification
# message matching PATTERN. $sdlog gets the unit's journal: the daemon's
# output and what systemd logged about the unit.
heard() {
	for _ in $(seq 50); do
		sdctl journalctl -u nvmeof-tgt -o short-monotonic --no-pager >"$sdlog" 2>&1 || true
		grep -q "Got notification message from PID $1" "$sdlog" && return 0
		sleep 0.2
	done
	return 1
}
sdctl() { nsenter -t "$sd" -m -p "$@"; }
state=""
for _ in $(seq 300); do
	kill -0 "$ns_parent" 2>/dev/null || fail "systemd exited: $(tail -20 "$RESULTS/$SCENARIO-unshare.log")"
	sd=$(pgrep -P "$ns_parent" -x systemd || true)
	[ -n "$sd" ] && state=$(sdctl systemctl is-system-running 2>/dev/null || true)
	case $state in running | degraded) break ;; esac
	sleep 0.1
done
case $state in running | degraded) ;; *) fail "systemd did not come up (state '$state'): $(tail -20 "$RESULTS/$SCENARIO-unshare.log")" ;; esac
echo "systemd $(sdctl systemctl --version | head -1 | cut -d' ' -f2) runs as pid $sd of the guest ($state)"

# Installed where systemd runs, so that postinst reloads it. The root is
# an overlay in the guest: installing touches nothing outside. dpkg reads
# the file list of every package installed, a thousand over the guest's
# 9p root (dpkg -i took 25 s): it gets a database of its own, with the
# packages ours depends on and none of their files (ours overlap none).
deps=$(dpkg-deb -f "$NVMEOF_TGT_DEB" Depends)
for p in libibverbs1 librdmacm1; do
	[[ ", $deps, " == *", $p, "* ]] || fail "the package does not depend on $p (Depends: $deps)"
done
# Ceph's libraries are loaded on first use: recommended, not required.
recs=$(dpkg-deb -f "$NVMEOF_TGT_DEB" Recommends)
[[ ", $recs, " == *", librbd1, "* && ", $deps, " != *"librbd1"* ]] ||
	fail "the package should recommend librbd1, not depend on it (Depends: $deps; Recommends: $recs)"
db=/tmp/$SCENARIO-dpkg
mkdir -p "$db/info" "$db/updates"
dpkg-query -s ${deps//,/} >"$db/status" || fail "dependencies not installed: $deps"
for p in $(dpkg-query --admindir="$db" -W -f='${Package} '); do : >"$db/info/$p.list"; done
sdctl dpkg --admindir="$db" -i "$NVMEOF_TGT_DEB" >"$RESULTS/$SCENARIO-dpkg.log" 2>&1 || fail "dpkg -i: $(tail -5 "$RESULTS/$SCENARIO-dpkg.log")"
echo "installed $(basename "$NVMEOF_TGT_DEB"), Depends: $deps"
assert_eq "state after dpkg -i" "$(sdctl systemctl is-active nvmeof-tgt || true)" inactive
assert_eq "enablement after dpkg -i" "$(sdctl systemctl is-enabled nvmeof-tgt || true)" disabled
/usr/bin/nvmeof-tgt -check -config /etc/nvmeof-tgt/config.yaml || fail "the packaged example does not pass -check"
systemd-analyze verify "$unit" >"$RESULTS/$SCENARIO-verify.log" 2>&1 ||
	fail "systemd-analyze verify: $(cat "$RESULTS/$SCENARIO-verify.log")"
[ -s "$RESULTS/$SCENARIO-verify.log" ] && fail "systemd-analyze verify warns: $(cat "$RESULTS/$SCENARIO-verify.log")"
good ""

journal() { sdctl journalctl -u nvmeof-tgt --no-pager -o short-monotonic >"$sdlog" 2>&1 || true; }
t0=$(date +%s.%N)
sdctl systemctl start nvmeof-tgt || { journal; fail "systemctl start: $(tail -20 "$sdlog")"; }
echo "systemctl start returned after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b - a}') s (Type=notify: after READY=1)"
assert_eq "state after start" "$(sdctl systemctl is-active nvmeof-tgt)" active
status=$(sdctl systemctl show -P StatusText nvmeof-tgt)
assert_eq "STATUS=" "$status" "1 subsystem, 0 allowed hosts (any host on 1), 0 controllers connected"
pid=$(sdctl systemctl show -P MainPID nvmeof-tgt)
# The build is stamped with git describe, as the README's build command.
[ -n "${NVMEOF_TGT_VERSION:-}" ] || fail "the harness passed no NVMEOF_TGT_VERSION (git describe failed?)"
assert_eq "nvmeof-tgt -version" "$(/usr/bin/nvmeof-tgt -version)" "nvmeof-tgt $NVMEOF_TGT_VERSION"
http_get 127.0.0.1:9750 /metrics /tmp/metrics.txt || fail "scraping /metrics"
grep -F "version=\"$NVMEOF_TGT_VERSION\"" /tmp/metrics.txt | grep '^nvmeof_tgt_build_info' >/dev/null ||
	fail "build_info does not carry version $NVMEOF_TGT_VERSION: $(grep build_info /tmp/metrics.txt)"
echo "ok: build_info says version $NVMEOF_TGT_VERSION"
dev=$(connect "$nqn")
echo "host connected: $dev"
head -c 4M /dev/urandom >/tmp/$SCENARIO.pattern
dd if=/tmp/$SCENARIO.pattern of="$dev" bs=1M oflag=direct status=none || fail "writing"
cmp <(dd if="$dev" bs=1M count=4 iflag=direct status=none) /tmp/$SCENARIO.pattern || fail "the host read back other data"
echo "ok: the host wrote 4 MiB and read them back"

# A good file: the reload succeeds, and systemd heard RELOADING=1.
good "  - {nqn: $nqn.b, hosts: [$(cat /etc/nvme/hostnqn)], namespaces: [{nsid: 1, backend: nullblk, size: 32MiB}]}"
sdctl systemctl reload nvmeof-tgt || { journal; fail "systemctl reload of a good file failed"; }
heard "$pid (RELOADING=1, MONOTONIC_USEC=" ||
	fail "systemd did not hear RELOADING=1: $(grep -i notification "$sdlog" | tail -5)"
echo "ok: systemd heard: $(grep -o "Got notification message from PID $pid (RELOADING=1.*" "$sdlog" | head -1)"
assert_eq "STATUS= after the reload" "$(sdctl systemctl show -P StatusText nvmeof-tgt)" \
	"2 subsystems, 1 allowed host (any host on 1), 1 controller connected"

# A broken file: systemctl reload fails, the daemon keeps serving.
printf 'ports: [{id: 1, address: %s}]\nsubsystems: [{nqn: x, namespaces: [{nsid: 0}]}]\n' "$ADDR" >/etc/nvmeof-tgt/config.yaml
rc=0
sdctl systemctl reload nvmeof-tgt 2>"$RESULTS/$SCENARIO-reload.err" || rc=$?
[ "$rc" != 0 ] || fail "systemctl reload of a broken file succeeded"
echo "ok: systemctl reload of a broken file exits $rc: $(head -1 "$RESULTS/$SCENARIO-reload.err")"
assert_eq "state after the rejected reload" "$(sdctl systemctl is-active nvmeof-tgt)" active
assert_eq "main pid after the rejected reload" "$(sdctl systemctl show -P MainPID nvmeof-tgt)" "$pid"
case $(sdctl systemctl show -P StatusText nvmeof-tgt) in
*"last reload failed"*) echo "ok: STATUS= says the last reload failed" ;;
*) fail "STATUS= does not report the rejected reload: $(sdctl systemctl show -P StatusText nvmeof-tgt)" ;;
esac
dd if="$dev" of=/dev/null bs=1M count=8 iflag=direct status=none || fail "reading after the rejected reload"
echo "ok: the host still reads"

# The watchdog: the first ping is due WatchdogSec/2 = 3 s after start.
heard "$pid (WATCHDOG=1)" || heard "$pid (WATCHDOG=1)" || fail "no WATCHDOG=1 within 20 s"
echo "ok: systemd heard WATCHDOG=1 (watchdog $(sdctl systemctl show -P WatchdogUSec nvmeof-tgt))"

disconnect "$nqn"
# prerm stops the daemon; postrm reloads systemd, which forgets the unit
# (so its Result= is gone: the journal says how it ended).
sdctl dpkg --admindir="$db" -r nvmeof-tgt >>"$RESULTS/$SCENARIO-dpkg.log" 2>&1 || fail "dpkg -r: $(tail -5 "$RESULTS/$SCENARIO-dpkg.log")"
journal
assert_eq "state after dpkg -r" "$(sdctl systemctl is-active nvmeof-tgt || true)" inactive
grep -q "nvmeof-tgt.service: Deactivated successfully" "$sdlog" || fail "the unit did not stop cleanly: $(tail -5 "$sdlog")"
heard "$pid (STOPPING=1)" || fail "systemd did not hear STOPPING=1"
echo "ok: STOPPING=1; the unit's journal is in $SCENARIO-target.log"
# The whole conversation in order, leaving out standalone STATUS= updates
# and watchdog pings, whose timing depends on the guest's speed.
seq=$(sed -n "s/.*Got notification message from PID $pid (\([A-Z_]*\)=.*/\1/p" "$sdlog" | grep -vx 'STATUS\|WATCHDOG' | xargs)
assert_eq "notifications systemd got" "$seq" "READY RELOADING READY RELOADING READY STOPPING"
