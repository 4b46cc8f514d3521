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

# rpc.py SOCKET: a client that stays up for the whole scenario (Python
# and jq each cost the emulated guest half a second to a second a start)
# and takes one request a line on stdin, tab-separated: OP EXPR METHOD
# PARAMS. OP is "call" (get_version first, then METHOD with PARAMS),
# "bare" (METHOD without the handshake), "raw" (METHOD is a line sent as
# it is) or "pad" (a line of METHOD bytes). Each request has a fresh
# connection. It answers with one line: EXPR evaluated with r, the
# response, and closed, "closed" or "open" after a raw or pad line (a
# tuple's items joined by spaces, dicts and lists as JSON), or "rpc.py
# failed: ..." with the reason.
cat >/tmp/rpc.py <<'PY'
import json, socket, sys

def send(s, f, line):
    try:
        s.sendall(line + b"\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before it was all sent: the response is there to read
    return json.loads(f.readline())

def call(s, f, method, params=None):
    req = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params:
        req["params"] = json.loads(params)
    return send(s, f, json.dumps(req).encode())

def show(v):
    if isinstance(v, tuple):
        return " ".join(show(x) for x in v)
    if isinstance(v, (dict, list, bool)) or v is None:
        return json.dumps(v, separators=(",", ":"))
    return str(v)

def serve(op, expr, method, params):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sys.argv[1])
    f = s.makefile("rwb")
    closed = None
    if op in ("raw", "pad"):
        line = method.encode() if op == "raw" else b'{"pad": "' + b"x" * int(method) + b'"}'
        r = send(s, f, line)
        try:
            rest = f.readline()
        except ConnectionResetError:
            rest = b""  # closed with the unread rest of our line still queued
        closed = "closed" if rest == b"" else "open"
    else:
        if op == "call":
            hello = call(s, f, "get_version", '{"api_version": 1}')
            assert "result" in hello, hello
        r = call(s, f, method, params)
    s.close()
    return show(eval(expr, {"json": json, "r": r, "closed": closed}))

for line in sys.stdin:
    try:
        out = serve(*line.rstrip("\n").split("\t"))
    except Exception as e:
        out = "rpc.py failed: %r" % (e,)
    print(out.replace("\n", " "), flush=True)
PY
# -S: no site module, whose imports are most of Python's start; rpc.py
# needs only the standard library.
coproc RPC { python3 -S /tmp/rpc.py "$sock"; }
# rpc OP EXPR METHOD [PARAMS]: one request to rpc.py; its answer in OUT.
rpc() {
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >&"${RPC[1]}"
	IFS= read -r -t 120 OUT <&"${RPC[0]}" || fail "rpc.py gave no answer to $3"
	[[ $OUT != "rpc.py failed:"* ]] || fail "$3 ${4:-}: $OUT"
}
# ok METHOD [PARAMS [EXPR]]: the call succeeds; OUT is EXPR of the
# response (default: the result).
ok() {
	rpc call "('ok', ${3:-r['result']}) if 'result' in r else ('refused', r)" "$1" "${2:-}"
	[[ $OUT == "ok "* ]] || fail "$1 ${2:-}: $OUT"
	OUT=${OUT#ok }
}
# refused WHAT CODE FIELD [bare] METHOD [PARAMS]: the call fails with CODE
# and data.field FIELD ("" for none); REFUSED is the response.
refused() {
	local what=$1 code=$2 field=$3 op=call got_code got_field
	shift 3
	[ "$1" != bare ] || { op=bare; shift; }
	rpc "$op" "(r.get('error', {}).get('code'), (r.get('error', {}).get('data') or {}).get('field') or '-', r)" "$@"
	echo "$what: $OUT"
	read -r got_code got_field REFUSED <<<"$OUT"
	assert_eq "$what: code" "$got_code" "$code"
	assert_eq "$what: field" "${got_field#-}" "$field"
}

config /tmp/tgt.yaml <<CFG
control: {socket: $sock}
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems: []
CFG
start_target /tmp/tgt.yaml

refused "before the handshake" -32001 "" bare get_state
rpc bare "r['result']['api_version']" get_version
assert_eq "api_version" "$OUT" 1
ok add_subsystem "{\"nqn\": \"$nqn\", \"hosts\": [\"$hostnqn\"], \"serial\": \"rpc0001\"}"
ok add_namespace "{\"nqn\": \"$nqn\", \"backend\": \"file\", \"path\": \"/data/rpc1.img\", \"size\": \"64MiB\"}" "r['result']['nsid']"
assert_eq "NSID chosen" "$OUT" 1
ok add_namespace "{\"nqn\": \"$nqn\", \"nsid\": 2, \"backend\": \"file\", \"path\": \"/data/rpc2.img\", \"size\": 134217728, \"block_size\": 4096}"
ok add_host "{\"nqn\": \"$nqn\", \"host\": \"$other\"}"
# Refusals: the field path -check would print, and the request parameter.
refused "a file namespace without a path" -32006 "subsystems[0].namespaces[2].path" \
	add_namespace "{\"nqn\": \"$nqn\", \"backend\": \"file\", \"size\": \"1MiB\"}"
[[ $REFUSED == *'"param":"path"'* ]] || fail "the parameter not named: $REFUSED"
echo "ok: the parameter named: path"
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
ours_ss="[s for s in r['result']['subsystems'] if s['nqn'] == '$nqn']"
ok get_state "" "(sum(len(s['controllers']) for s in $ours_ss), sum(len(s['hosts']) for s in $ours_ss))"
read -r ctrls hosts <<<"$OUT"
assert_eq "controllers in get_state" "$ctrls" 1
assert_eq "hosts in get_state" "$hosts" 2

# save_config's YAML is a configuration -check accepts.
ok save_config '{"path": "/tmp/rpc-saved.yaml"}'
"$NVMEOF_TGT" -check -config /tmp/rpc-saved.yaml || fail "-check rejects save_config's file"

# Removing namespace 2 takes it off the connected host; then the rest goes.
ok remove_namespace "{\"nqn\": \"$nqn\", \"nsid\": 2}"
wait_ns_gone "$nqn" 2
ok remove_host "{\"nqn\": \"$nqn\", \"host\": \"$other\"}"
refused "a namespace removed" -32004 nsid remove_namespace "{\"nqn\": \"$nqn\", \"nsid\": 2}"
disconnect "$nqn"
ok remove_subsystem "{\"nqn\": \"$nqn\"}"
ok get_state "" "len(r['result']['subsystems'])"
assert_eq "subsystems after removal" "$OUT" 0

# Hostile input: an error, the connection closed, the daemon serving on.
rpc raw "(r['error']['code'], closed)" '{"jsonrpc": "2.0", "id": 1, "method":'
echo "not JSON: $OUT"
assert_eq "not JSON: code and connection" "$OUT" "-32700 closed"
rpc pad "(r['error']['code'], closed)" $((2 << 20))
assert_eq "2 MiB request: code and connection" "$OUT" "-32600 closed"
rpc bare "r['result']['api_version']" get_version
assert_eq "api_version afterwards" "$OUT" 1
nvme discover -t rdma -a "$ADDR" -s "$PORT" >/dev/null || fail "discovery after hostile input"
stop_target
