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
assert_eq "id-ctrl subnqn" "$(echo "$idctrl" | jq -r .subnqn)" "$nqn"
assert_eq "id-ctrl serial" "$(echo "$idctrl" | jq -r .sn | xargs)" E2ESERIAL01
assert_eq "id-ctrl cntrltype" "$(echo "$idctrl" | jq -r .cntrltype)" 1
idns=$(nvme id-ns "$dev" -o json)
assert_eq "id-ns nsze" "$(echo "$idns" | jq -r .nsze)" $((256 << 20 >> 12))
descs=$(nvme ns-descs "$dev" -o json)
echo "ns-descs: $descs"
assert_eq "ns-descs uuid" "$(echo "$descs" | jq -r '.["ns-descs"][] | select(.type == "uuid") | .uuid')" 6a1f3c2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b
assert_eq "block device uuid" "$(cat /sys/block/"$(basename "$dev")"/uuid)" 6a1f3c2e-5b7d-4e8f-9a0b-1c2d3e4f5a6b
disconnect "$nqn"
stop_target
