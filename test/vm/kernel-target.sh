# The Linux kernel NVMe-oF target (nvmet-rdma), set up through configfs.
# Source this file inside the test guest, as root. The end-to-end suite
# runs its scenarios against it (TARGET=kernel) to check the suite itself,
# and the benchmark runs the same fio jobs against it for comparison.
#
#   kt_load                                  modules and configfs
#   kt_port ID ADDR [SVCID] [INLINE]         an RDMA port (KT_TRTYPE=tcp: a TCP one)
#   kt_subsystem NQN [SERIAL] [MODEL]        a subsystem open to any host
#   kt_allow_host NQN HOSTNQN                restrict NQN to an allow-list
#   kt_host_auth HOSTNQN KEY [CKEY [HASH [GRP]]] the host's DH-HMAC-CHAP keys, hash and DH group
#   kt_namespace NQN NSID DEVICE [UUID [GRP]] a namespace over a block device, in ANA group GRP
#   kt_link PORT NQN                         expose NQN on PORT
#   kt_ana PORT GROUP STATE                  a port's ANA state for a group (optimized, non_optimized, ...)
#   kt_ns_group NQN NSID GROUP               the namespace's ANA group
#   kt_cntlid NQN MIN MAX                    the controller IDs the subsystem hands out
#   kt_referral PORT NAME ADDR [SVCID]       list another discovery port in PORT's discovery log
#   kt_file_dev FILE SIZE BS BUFFERED RO     print a loop device over FILE
#   kt_nullb SIZE BS                         print a new null_blk device
#   kt_from_config FILE                      all of the above from a nvmeof-tgt YAML file
#   kt_clear                                 tear everything down
#
# KT_TRTYPE=tcp makes the ports NVMe/TCP ones (nvmet-tcp) instead of RDMA.
#
# Every function fails (non-zero) on the first step that fails, so callers
# under set -e stop there.

KT_CFS=/sys/kernel/config/nvmet
KT_NULLB=/sys/kernel/config/nullb
KT_STATE=/run/kernel-target

kt_load() {
	modprobe nvmet
	modprobe nvmet-rdma
	[ "${KT_TRTYPE:-rdma}" != tcp ] || modprobe nvmet-tcp
	modprobe loop
	# No default device: kt_nullb makes each one with the size it needs.
	modprobe null_blk nr_devices=0
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	mkdir -p "$KT_STATE"
}

kt_port() { # ID ADDR [SVCID] [INLINE_DATA_SIZE]
	local p=$KT_CFS/ports/$1 fam=ipv4
	[[ $2 != *:* ]] || fam=ipv6
	mkdir "$p"
	echo "${KT_TRTYPE:-rdma}" >"$p/addr_trtype"
	echo "$fam" >"$p/addr_adrfam"
	echo "$2" >"$p/addr_traddr"
	echo "${3:-4420}" >"$p/addr_trsvcid"
	if [ -n "${4:-}" ]; then
		echo "$4" >"$p/param_inline_data_size"
	fi
}

kt_subsystem() { # NQN [SERIAL] [MODEL]
	local s=$KT_CFS/subsystems/$1
	mkdir "$s"
	echo 1 >"$s/attr_allow_any_host"
	# The serial and model can only be set before a host has seen them.
	if [ -n "${2:-}" ]; then echo "$2" >"$s/attr_serial"; fi
	if [ -n "${3:-}" ]; then echo "$3" >"$s/attr_model"; fi
}

kt_allow_host() { # NQN HOSTNQN (an empty HOSTNQN only closes the subsystem)
	local s=$KT_CFS/subsystems/$1
	# nvmet refuses an allow-list on a subsystem open to any host: close it first.
	echo 0 >"$s/attr_allow_any_host"
	[ -n "${2:-}" ] || return 0
	[ -d "$KT_CFS/hosts/$2" ] || mkdir "$KT_CFS/hosts/$2"
	ln -s "$KT_CFS/hosts/$2" "$s/allowed_hosts/$2"
}

# kt_host_auth HOSTNQN KEY [CTRL_KEY [HASH [DHGROUP]]]: the host's
# DH-HMAC-CHAP secrets (DHHC-1 form) and the hash (sha256, sha384, sha512)
# and DH group (null, ffdhe2048 ...) nvmet asks it for. nvmet keeps these
# per host, for every subsystem, where nvmeof-tgt keeps them per
# subsystem entry (hash and group lists per subsystem, narrowed per host).
kt_host_auth() {
	local h=$KT_CFS/hosts/$1
	[ -d "$h" ] || mkdir "$h" || return 1
	echo "$2" >"$h/dhchap_key" || return 1
	if [ -n "${3:-}" ]; then echo "$3" >"$h/dhchap_ctrl_key" || return 1; fi
	if [ -n "${4:-}" ]; then echo "hmac($4)" >"$h/dhchap_hash" || return 1; fi
	if [ -n "${5:-}" ]; then echo "$5" >"$h/dhchap_dhgroup" || return 1; fi
}

kt_namespace() { # NQN NSID DEVICE [UUID [ANA_GROUP]]
	local n=$KT_CFS/subsystems/$1/namespaces/$2
	mkdir "$n"
	echo "$3" >"$n/device_path"
	if [ -n "${4:-}" ]; then echo "$4" >"$n/device_uuid"; fi
	if [ -n "${5:-}" ]; then echo "$5" >"$n/ana_grpid"; fi
	echo 1 >"$n/enable"
}

kt_link() { # PORT NQN
	ln -s "$KT_CFS/subsystems/$2" "$KT_CFS/ports/$1/subsystems/$2"
}

# kt_ana PORT GROUP STATE: set the port's ANA state for the group, creating
# the group on the port first. STATE is spelled as in nvmeof-tgt's YAML
# (non_optimized, persistent_loss); nvmet spells it with a hyphen. nvmet
# starts a group it has not been told about as inaccessible on every port,
# where nvmeof-tgt takes optimized: kt_from_config creates every group used
# on every port.
kt_ana() {
	local g=$KT_CFS/ports/$1/ana_groups/$2
	[ -d "$g" ] || mkdir "$g" || return 1
	echo "${3//_/-}" >"$g/ana_state"
}

kt_ns_group() { # NQN NSID GROUP (the group must exist on some port)
	echo "$3" >"$KT_CFS/subsystems/$1/namespaces/$2/ana_grpid"
}

kt_cntlid() { # NQN MIN MAX (before any host connects)
	local s=$KT_CFS/subsystems/$1
	# nvmet keeps min <= max at every write: widen first, then narrow.
	echo 1 >"$s/attr_cntlid_min" && echo 65519 >"$s/attr_cntlid_max" &&
		echo "$2" >"$s/attr_cntlid_min" && echo "$3" >"$s/attr_cntlid_max"
}

kt_referral() { # PORT NAME ADDR [SVCID]
	local r=$KT_CFS/ports/$1/referrals/$2 fam=ipv4
	[[ $3 != *:* ]] || fam=ipv6
	mkdir "$r" || return 1
	echo rdma >"$r/addr_trtype"
	echo "$fam" >"$r/addr_adrfam"
	echo "$3" >"$r/addr_traddr"
	echo "${4:-4420}" >"$r/addr_trsvcid"
	echo 1 >"$r/enable"
}

# kt_file_dev FILE SIZE BLOCK_SIZE BUFFERED READ_ONLY: a loop device over
# FILE (created sparse, or grown, to SIZE bytes), so the namespace gets the
# logical block size asked for, as nvmeof-tgt's file backend gives it.
kt_file_dev() {
	local file=$1 size=$2 bs=$3 buffered=$4 ro=$5 dev
	local args=(--find --show --sector-size "$bs")
	mkdir -p "$(dirname "$file")"
	if [ ! -e "$file" ] || [ "$(stat -c %s "$file")" -lt "$size" ]; then
		truncate -s "$size" "$file"
	fi
	[ "$buffered" = true ] || args+=(--direct-io=on)
	[ "$ro" != true ] || args+=(--read-only)
	dev=$(losetup "${args[@]}" "$file")
	echo "$dev" >>"$KT_STATE/loops"
	echo "$dev"
}

# kt_nullb SIZE BLOCK_SIZE: a null_blk device made through configfs (reads
# return whatever the buffer held, writes go nowhere).
kt_nullb() {
	local size=$1 bs=$2 d i=0
	if [ $((size % (1 << 20))) != 0 ]; then
		echo "kt_nullb: null_blk sizes are whole MiB, got $size bytes" >&2
		return 1
	fi
	while [ -e "$KT_NULLB/kt$i" ]; do i=$((i + 1)); done
	d=$KT_NULLB/kt$i
	mkdir "$d"
	echo $((size >> 20)) >"$d/size"
	echo "$bs" >"$d/blocksize"
	echo 1 >"$d/power"
	# 6.1 names the disk nullb<index>; later kernels after the configfs item.
	if [ -b "/dev/kt$i" ]; then
		echo "/dev/kt$i"
	else
		echo "/dev/nullb$(cat "$d/index")"
	fi
}

# kt_bytes SIZE: a nvmeof-tgt size (4096, 512MiB, 100MB, 2G) in bytes.
kt_bytes() {
	local s=${1// /} m=1
	case $s in
	*KiB) m=$((1 << 10)) s=${s%KiB} ;;
	*MiB) m=$((1 << 20)) s=${s%MiB} ;;
	*GiB) m=$((1 << 30)) s=${s%GiB} ;;
	*TiB) m=$((1 << 40)) s=${s%TiB} ;;
	*KB) m=1000 s=${s%KB} ;;
	*MB) m=1000000 s=${s%MB} ;;
	*GB) m=1000000000 s=${s%GB} ;;
	*TB) m=1000000000000 s=${s%TB} ;;
	*K) m=$((1 << 10)) s=${s%K} ;;
	*M) m=$((1 << 20)) s=${s%M} ;;
	*G) m=$((1 << 30)) s=${s%G} ;;
	*T) m=$((1 << 40)) s=${s%T} ;;
	*B) s=${s%B} ;;
	esac
	[[ $s =~ ^[0-9]+$ ]] || { echo "kt_bytes: bad size '$1'" >&2; return 1; }
	echo $((s * m))
}

# kt_uuid TEXT: a UUID (version 8, name-based) that depends only on TEXT.
kt_uuid() {
	local h
	h=$(printf '%s' "$1" | sha256sum | cut -c1-32)
	echo "${h:0:8}-${h:8:4}-8${h:13:3}-a${h:17:3}-${h:20:12}"
}

# kt_from_config FILE: set up the ports, subsystems, hosts and namespaces of
# a nvmeof-tgt configuration file. The log and metrics sections have no
# kernel counterpart and are ignored. A host entry with keys gets them
# (inline or from its files), with the first of the subsystem's
# dhchap_hashes and dhchap_dhgroups, since nvmet asks for one of each.
kt_from_config() {
	local lines kind a b c d e f g h i dev all_ports=() p groups=""
	# yq (jq over YAML) flattens the file into '|'-separated records; '|'
	# rather than a tab, because read would merge empty tab fields. The
	# ANA groups in use come first: each port gets all of them.
	lines=$(yq -r '
		(["groups", ([(.ports // [])[] | (.ana // {}) | keys[] | tonumber] +
			[(.subsystems // [])[] | (.namespaces // [])[] | (.ana_group // 1)] | unique | map(tostring) | join(","))]),
		((.ports // [])[] | . as $p | ["port", .id, .address, (.port // 4420), (.inline_data_size // "")],
			((.ana // {}) | to_entries[] | ["ana", $p.id, .key, .value]),
			((.referrals // []) | to_entries[] | ["referral", $p.id, "r\(.key)", .value.address, (.value.port // 4420)])),
		((.subsystems // [])[] | . as $s |
			["subsys", .nqn, (.allow_any_host // false), (.serial // ""), (.model // ""), (.cntlid_min // 1), (.cntlid_max // 65519)],
			((.hosts // [])[] | if type == "string" then ["host", $s.nqn, .] else
				["host", $s.nqn, .nqn, (.dhchap_key // ""), (.dhchap_key_file // ""),
					(.dhchap_ctrl_key // ""), (.dhchap_ctrl_key_file // ""),
					(($s.dhchap_hashes // [])[0] // ""), (($s.dhchap_dhgroups // [])[0] // "")] end),
			((.namespaces // [])[] | ["ns", $s.nqn, .nsid, .backend, (.path // ""), (.size // ""),
				(.block_size // 0), (.buffered // false), (.read_only // false), (.uuid // ""), (.ana_group // 1)]),
			["link", .nqn, ((.ports // []) | map(tostring) | join(","))])
		| map(tostring) | join("|")' "$1") || return 1
	while IFS='|' read -r kind a b c d e f g h i j; do
		case $kind in
		groups) groups=$a ;;
		port)
			kt_port "$a" "$b" "$c" "$d" || return 1
			all_ports+=("$a")
			for g in ${groups//,/ }; do kt_ana "$a" "$g" optimized || return 1; done
			;;
		ana) kt_ana "$a" "$b" "$c" || return 1 ;;
		referral) kt_referral "$a" "$b" "$c" "$d" || return 1 ;;
		subsys)
			kt_subsystem "$a" "$c" "$d" || return 1
			if [ "$b" != true ]; then kt_allow_host "$a" "" || return 1; fi
			if [ "$e" != 1 ] || [ "$f" != 65519 ]; then kt_cntlid "$a" "$e" "$f" || return 1; fi
			;;
		host) # a=nqn b=hostnqn c=key d=key_file e=ctrl_key f=ctrl_key_file g=hash h=dhgroup
			kt_allow_host "$a" "$b" || return 1
			[ -z "$d" ] || c=$(<"$d") || return 1
			[ -z "$f" ] || e=$(<"$f") || return 1
			if [ -n "$c" ]; then kt_host_auth "$b" "$c" "$e" "$g" "$h" || return 1; fi
			;;
		ns) # a=nqn b=nsid c=backend d=path e=size f=block_size g=buffered h=read_only i=uuid
			[ "$f" != 0 ] || f=512
			case $c in
			file) dev=$(kt_file_dev "$d" "$(kt_bytes "$e")" "$f" "$g" "$h") || return 1 ;;
			nullblk) dev=$(kt_nullb "$(kt_bytes "$e")" "$f") || return 1 ;;
			block) dev=$d ;;
			*) echo "kt_from_config: unknown backend $c" >&2; return 1 ;;
			esac
			# nvmet draws a random UUID per namespace; a host that reconnects
			# after a restart would see "identifiers changed" and drop the
			# namespace. Like nvmeof-tgt, derive a stable one from nqn and nsid.
			[ -n "$i" ] || i=$(kt_uuid "$a/$b")
			kt_namespace "$a" "$b" "$dev" "$i" "$j" || return 1
			;;
		link)
			if [ -n "$b" ]; then
				for p in ${b//,/ }; do kt_link "$p" "$a" || return 1; done
			else
				for p in "${all_ports[@]}"; do kt_link "$p" "$a" || return 1; done
			fi
			;;
		esac
	done <<<"$lines"
}

# kt_clear: remove every port, subsystem, host, namespace, loop and null
# device, in the order configfs allows (links first). Connected hosts lose
# their controllers, as with a target that stops.
kt_clear() {
	local x
	if [ -d "$KT_CFS" ]; then
		for x in "$KT_CFS"/ports/*/subsystems/* "$KT_CFS"/subsystems/*/allowed_hosts/*; do
			if [ -L "$x" ]; then rm "$x" || return 1; fi
		done
		for x in "$KT_CFS"/subsystems/*/namespaces/*; do
			if [ -d "$x" ]; then
				echo 0 >"$x/enable" && rmdir "$x" || return 1
			fi
		done
		# A port's referrals and ANA groups go before it; group 1 is the
		# port's own and goes with it.
		for x in "$KT_CFS"/ports/*/referrals/* "$KT_CFS"/ports/*/ana_groups/*; do
			if [ -d "$x" ] && [ "$x" = "${x%/ana_groups/1}" ]; then rmdir "$x" || return 1; fi
		done
		for x in "$KT_CFS"/subsystems/* "$KT_CFS"/hosts/* "$KT_CFS"/ports/*; do
			if [ -d "$x" ]; then rmdir "$x" || return 1; fi
		done
	fi
	if [ -f "$KT_STATE/loops" ]; then
		while read -r x; do losetup -d "$x" || return 1; done <"$KT_STATE/loops"
		rm "$KT_STATE/loops"
	fi
	for x in "$KT_NULLB"/kt*; do
		if [ -d "$x" ]; then
			echo 0 >"$x/power" && rmdir "$x" || return 1
		fi
	done
}
