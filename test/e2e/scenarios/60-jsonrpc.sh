# The management API without our binary: a Python standard-library client
# speaks JSON-RPC 2.0 to the admin socket, builds a subsystem with a
# namespace and an allowed host on a daemon started without any, the host
# connects and does verified I/O, then the namespace and the subsystem go.
# Refusals carry the documented codes and name the field; a line that is
# not JSON or is too large gets an error and the connection closes.
daemon_only "the JSON-RPC admin socket is nvmeof-tgt's"
command -v python3 >/dev/null || fail "python3 is missing in the guest (it shares the host's /usr/bin/python3)"
sock=/tmp/nvmeof-tgt-api.sock
nqn=nqn.2026-11.io.example:rpc
hostnqn=$(cat /etc/nvme/hostnqn)
other=nqn.2014-08.org.nvmexpress:uuid:88888888-8888-8888-8888-888888888888

# rpc.py SOCKET [--no-handshake] METHOD [PARAMS]: one call on a fresh
# connection, after get_version unless told otherwise; prints the
# response line. rpc.py SOCKET --raw LINE: sends LINE as it is and prints
# the response, then "closed" if the daemon closed the connection;
# --pad N sends a line of N bytes so.
cat >/tmp/rpc.py <<'PY'
import json, socket, sys

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
f = s.makefile("rwb")
args = sys.argv[2:]

def send(line):
    try:
        s.sendall(line + b"\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before it was all sent: the response is there to read
    return f.readline()

if args[0] in ("--raw", "--pad"):
    line = args[1].encode() if args[0] == "--raw" else b'{"pad": "' + b"x" * int(args[1]) + b'"}'
    sys.stdout.write(send(line).decode())
    try:
        rest = f.readline()
    except ConnectionResetError:
        rest = b""  # closed with the unread rest of our line still queued
    print("closed" if rest == b"" else "open")
    sys.exit(0)
if args[0] == "--no-handshake":
    args = args[1:]
else:
    hello = json.loads(send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "get_version",
                                        "params": {"api_version": 1}}).encode()))
    assert "result" in hello, hello
req = {"jsonrpc": "2.0", "id": 1, "method": args[0]}
if len(args) > 1:
    req["params"] = json.loads(args[1])
sys.stdout.write(send(json.dumps(req).encode()).decode())
PY
# -S: no site module, whose imports are most of Python's start, a second
# or more in the emulated guest; rpc.py needs only the standard library.
rpc() { python3 -S /tmp/rpc.py "$sock" "$@" || fail "rpc.py $*"; }
# ok METHOD [PARAMS]: the call succeeds; prints its result.
ok() {
	local r
	r=$(rpc "$@")
	echo "$r" | jq -e 'has("result")' >/dev/null || fail "$1 $2: $r"
	echo "$r" | jq -c .result
}
# refused WHAT CODE FIELD METHOD [PARAMS]: the call fails with CODE and
# data.field FIELD.
refused() {
	local what=$1 code=$2 field=$3 r
	shift 3
	r=$(rpc "$@")
	echo "$what: $r"
	assert_eq "$what: code" "$(echo "$r" | jq .error.code)" "$code"
	assert_eq "$what: field" "$(echo "$r" | jq -r '.error.data.field // ""')" "$field"
	REFUSED=$r
}

config /tmp/tgt.yaml <<CFG
control: {socket: $sock}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems: []
CFG
start_target /tmp/tgt.yaml

refused "before the handshake" -32001 "" --no-handshake get_state
assert_eq "api_version" "$(rpc --no-handshake get_version | jq .result.api_version)" 1
ok add_subsystem "{\"nqn\": \"$nqn\", \"hosts\": [\"$hostnqn\"], \"serial\": \"rpc0001\"}"
assert_eq "NSID chosen" "$(ok add_namespace "{\"nqn\": \"$nqn\", \"backend\": \"file\", \"path\": \"/data/rpc1.img\", \"size\": \"64MiB\"}" | jq .nsid)" 1
ok add_namespace "{\"nqn\": \"$nqn\", \"nsid\": 2, \"backend\": \"file\", \"path\": \"/data/rpc2.img\", \"size\": 134217728, \"block_size\": 4096}"
ok add_host "{\"nqn\": \"$nqn\", \"host\": \"$other\"}"
# Refusals: the field path -check would print, and the request parameter.
refused "a file namespace without a path" -32006 "subsystems[0].namespaces[2].path" \
	add_namespace "{\"nqn\": \"$nqn\", \"backend\": \"file\", \"size\": \"1MiB\"}"
assert_eq "the parameter named" "$(echo "$REFUSED" | jq -r .error.data.param)" path
refused "a missing block device" -32007 "subsystems[0].namespaces[2]" \
	add_namespace "{\"nqn\": \"$nqn\", \"backend\": \"block\", \"path\": \"/dev/no-such-disk\"}"
refused "a host twice" -32005 host add_host "{\"nqn\": \"$nqn\", \"host\": \"$other\"}"
refused "an unknown parameter" -32602 sise add_namespace "{\"nqn\": \"$nqn\", \"backend\": \"nullblk\", \"sise\": 1}"
refused "an unknown method" -32601 method add_volume "{}"
refused "a missing subsystem" -32004 nqn remove_subsystem '{"nqn": "nqn.2026-11.io.example:none"}'

# The host connects as the allowed host and does verified I/O on both.
dev=$(connect "$nqn")
dev2=$(wait_dev "$nqn" 2)
assert_eq "namespace 1 size" "$(blockdev --getsize64 "$dev")" $((64 << 20))
assert_eq "namespace 2 block size" "$(blockdev --getss "$dev2")" 4096
fio_ok rpc --filename="$dev" --rw=randwrite --bs=4k --iodepth=16 --ioengine=libaio --direct=1 --size=8m --verify=crc32c
fio_ok rpc2 --filename="$dev2" --rw=write --bs=64k --iodepth=8 --ioengine=libaio --direct=1 --size=16m --verify=crc32c
state=$(ok get_state)
assert_eq "controllers in get_state" "$(echo "$state" | jq --arg n "$nqn" '[.subsystems[] | select(.nqn == $n) | .controllers[]] | length')" 1
assert_eq "hosts in get_state" "$(echo "$state" | jq -c --arg n "$nqn" '.subsystems[] | select(.nqn == $n) | .hosts | length')" 2

# save_config's YAML is a configuration -check accepts.
ok save_config '{"path": "/tmp/rpc-saved.yaml"}' >/dev/null
"$NVMEOF_TGT" -check -config /tmp/rpc-saved.yaml || fail "-check rejects save_config's file"

# Removing namespace 2 takes it off the connected host; then the rest goes.
ok remove_namespace "{\"nqn\": \"$nqn\", \"nsid\": 2}" >/dev/null
wait_ns_gone "$nqn" 2
ok remove_host "{\"nqn\": \"$nqn\", \"host\": \"$other\"}" >/dev/null
refused "a namespace removed" -32004 nsid remove_namespace "{\"nqn\": \"$nqn\", \"nsid\": 2}"
disconnect "$nqn"
ok remove_subsystem "{\"nqn\": \"$nqn\"}" >/dev/null
assert_eq "subsystems after removal" "$(ok get_state | jq '.subsystems | length')" 0

# Hostile input: an error, the connection closed, the daemon serving on.
out=$(python3 -S /tmp/rpc.py "$sock" --raw '{"jsonrpc": "2.0", "id": 1, "method":')
echo "not JSON: $out"
assert_eq "not JSON: code" "$(echo "$out" | head -1 | jq .error.code)" -32700
assert_eq "not JSON: connection" "$(echo "$out" | tail -1)" closed
out=$(python3 -S /tmp/rpc.py "$sock" --pad $((2 << 20)))
assert_eq "2 MiB request: code" "$(echo "$out" | head -1 | jq .error.code)" -32600
assert_eq "2 MiB request: connection" "$(echo "$out" | tail -1)" closed
assert_eq "api_version afterwards" "$(rpc get_version | jq .result.api_version)" 1
nvme discover -t rdma -a "$ADDR" -s "$PORT" >/dev/null || fail "discovery after hostile input"
stop_target
