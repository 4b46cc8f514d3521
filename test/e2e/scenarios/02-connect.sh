# nvme connect gives a block device of exactly the configured size, and
# nvme id-ctrl / id-ns describe the subsystem and namespace.
nqn=nqn.2026-11.io.example:vol1
config /tmp/tgt.yaml <<CFG
ports: [{id: 1, address: $ADDR, port: $PORT}]
subsystems:
  - nqn: $nqn
    serial: E2ESERIAL01
    allow_any_host: true
    namespaces: [{nsid: 1, backend: file, path: /data/vol1.img, size: 256MiB, block_size: 4096, uuid: 6a1f3c2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b}]
CFG
start_target /tmp/tgt.yaml
dev=$(connect "$nqn")
ctrl=/dev/$(ctrl_of "$nqn")
assert_eq "device size" "$(blockdev --getsize64 "$dev")" $((256 << 20))
assert_eq "logical block size" "$(blockdev --getss "$dev")" 4096
idctrl=$(nvme id-ctrl "$ctrl" -o json)
idns=$(nvme id-ns "$dev" -o json)
descs=$(nvme ns-descs "$dev" -o json)
echo "ns-descs: $descs"
jqs "[$idctrl, $idns, $descs]" '.[0].subnqn' '.[0].sn | sub(" +$"; "")' '.[0].cntrltype' '.[1].nsze' \
	'.[2]["ns-descs"][] | select(.type == "uuid") | .uuid'
assert_eq "id-ctrl subnqn" "${JQ[0]}" "$nqn"
assert_eq "id-ctrl serial" "${JQ[1]}" E2ESERIAL01
assert_eq "id-ctrl cntrltype" "${JQ[2]}" 1
assert_eq "id-ns nsze" "${JQ[3]}" $((256 << 20 >> 12))
assert_eq "ns-descs uuid" "${JQ[4]}" 6a1f3c2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b
assert_eq "block device uuid" "$(cat /sys/block/"$(basename "$dev")"/uuid)" 6a1f3c2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b
disconnect "$nqn"
stop_target
