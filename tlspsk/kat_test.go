package tlspsk

import (
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"testing"
)

// Known answers, all computed by the implementations a host runs, none by
// this package:
//
//   - libnvmeKATs: libnvme 1.16.2 (tag v1.16.2 of linux-nvme/libnvme; its
//     src/nvme/linux.c is unchanged at commit 03297d8bf6f7) with OpenSSL 3.0.22
//     (Debian 12). Its src/nvme/linux.c was compiled into a short C program so
//     that its static functions could be called:
//     nvme_export_tls_key_versioned() gives the interchange string,
//     derive_retained_key() or derive_retained_key_compat() the retained PSK,
//     and derive_nvme_keys(), the body of nvme_generate_tls_key_identity() and
//     nvme_insert_tls_key_versioned() (compat false or true), the identity and
//     the TLS PSK. The inputs: libnvme's own test key (the first 32 or all 48
//     bytes of test/psk.c's configured_psk) with its test NQNs, and the key
//     whose byte i is 40h+3i with a UUID host NQN, for HH 01, 02 and 00,
//     identity versions 0 and 1. The version 1 identities of the test key are
//     also the expected values of libnvme's test/psk.c. libnvme 1.15 (tag
//     v1.15, the last before the compat functions were split off), built and
//     called the same way, gives exactly the compat rows, HH 00 included:
//     compat is what it computed. libnvme 1.8 gives them for version 0 and
//     refuses HH 00; its version 1 rows are below. To regenerate, call those
//     functions with these inputs.
//   - nvmeCLIKeys: nvme-cli 2.3 with libnvme 1.3 (Debian 12's nvme-cli
//     2.4+really2.3-3): `nvme gen-tls-key --hmac=N` printed the keys, from
//     random secrets, and `nvme check-tls-key --key=K` printed "Key is valid
//     (HMAC N, length L, CRC C)". That version computes no derived key.
//   - kernelKATs: Linux's drivers/nvme/common/auth.c. The first two rows are
//     the expected values of its KUnit test (drivers/nvme/common/tests/
//     auth_kunit.c: session key byte i = 'A'+i, C1 byte i = i, C2 byte i =
//     FFh-i, NQNs "hostnqn" and "subsysnqn"). All rows come from the bodies
//     of nvme_auth_generate_psk(), nvme_auth_generate_digest() and
//     nvme_auth_derive_tls_psk() compiled in user space, with HMAC and
//     HKDF-Extract/Expand taken from OpenSSL 3.0.22 (the program reproduces
//     the KUnit values), and with nvme_auth_derive_tls_psk() as merged for
//     Linux 6.14 (before commit c5931d590e79, "nvme-auth: use
//     hkdf_expand_label()", in 6.18) for the tlsPSK614 column. The last two
//     rows use a 256-byte session key (an ffdhe2048 shared secret's size,
//     byte i = 5i+1 mod 256), C1 byte i = 10h+i, C2 byte i = C0h-i.

const (
	testHost   = "nqn.psk-test-host"
	testSub    = "nqn.psk-test-subsys"
	uuidHost   = "nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6"
	exampleSub = "nqn.2024-06.io.example:tank.vol7"
)

var libnvmeKATs = []struct {
	host, sub string
	version   int
	d         Derivation
	key       string // the interchange string libnvme exports
	retained  string
	identity  string
	tlsPSK    string
}{
	{testHost, testSub, 0, DerivationRFC8446,
		"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
		"073311dec37e219ff3acd43f130130c5bdd443c066e1cc3424e49030234ff7d5",
		"NVMe0R01 nqn.psk-test-host nqn.psk-test-subsys",
		"05c6503551ad136e6ee32e6eeb3f6d500b69701d84ec71e328f65c7f51566f68"},
	{testHost, testSub, 0, DerivationRFC8446,
		"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:",
		"73973a1b51a9acdde29a0610ac6a3ef852cf45936cca6830a661d18f68502f1a4c7a8ecb37524e0b1f7087cb4d680ad9",
		"NVMe0R02 nqn.psk-test-host nqn.psk-test-subsys",
		"f42ba63824cdfe421914c582921f85b5b5b7e2d4df084caeedc9be20b212e8bb0fe8a23e9d59a1c8fc6449da4970a78d"},
	{uuidHost, exampleSub, 0, DerivationRFC8446,
		"NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"319dfa2f648a108d9408ea968010eccab45b1f531d0868a59fb25d999e4d6675",
		"NVMe0R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"aba76ec8224025d55200ee10a82fc77250f3dabec272b8c36b676c453c50117f"},
	{uuidHost, exampleSub, 0, DerivationRFC8446,
		"NVMeTLSkey-1:02:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"69c611fb4b65509ac884a453580b5b44653faf5e96532b6c3ea0f57bd3be71e94a38d53133d69733b18d2b7431b61e41",
		"NVMe0R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"34100ec01b88cd97a6c391fdc4c577e15287b7746d6d861a28088c83a13be934a6abc2c38292da9087858dfccf8e985f"},
	{uuidHost, exampleSub, 0, DerivationRFC8446,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9d",
		"NVMe0R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"a2944501c37950e49afbd86930d4dcb9dd4f226e6b60bdf6d4f0f17097b1fbe4"},
	{uuidHost, exampleSub, 0, DerivationRFC8446,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9da0a3a6a9acafb2b5b8bbbec1c4c7cacd",
		"NVMe0R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"29ab627dbbb33b4d0ab90347ae7d65c41298e32e07a7ee12075f24673a9cc49e5d7b4911aea6f1c5f582e95f4e673390"},
	{testHost, testSub, 1, DerivationRFC8446,
		"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
		"073311dec37e219ff3acd43f130130c5bdd443c066e1cc3424e49030234ff7d5",
		"NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys iSbjiStwJ/1TrTvDlt2fjFmzvsytOJelidNnA+X5lEU=",
		"8fc3c0badfd4c0c66fa3ca33aadd0314f85536cc9bc47338b60f3e6e563786ca"},
	{testHost, testSub, 1, DerivationRFC8446,
		"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:",
		"73973a1b51a9acdde29a0610ac6a3ef852cf45936cca6830a661d18f68502f1a4c7a8ecb37524e0b1f7087cb4d680ad9",
		"NVMe1R02 nqn.psk-test-host nqn.psk-test-subsys QhW2+Rp6RzHlNtCslyRxMnwJ11tKKhz8JCAQpQ+XUD8f9td1VeH5h53yz2wKJG1a",
		"a2b2f943f479fc682555cec89857c80ed004ce92f32a973d5764155bb7e36b17a85368a0666d250afac9282dda2e62ca"},
	{uuidHost, exampleSub, 1, DerivationRFC8446,
		"NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"319dfa2f648a108d9408ea968010eccab45b1f531d0868a59fb25d999e4d6675",
		"NVMe1R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 UaEMNED0m9JQI/en5wwqXDgM0fgmFsOnkDv0b9hotyg=",
		"98c8c99bd1c78f999ac5c76fdb3bb371a964f790239eed7d6aef9e914fe2be44"},
	{uuidHost, exampleSub, 1, DerivationRFC8446,
		"NVMeTLSkey-1:02:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"69c611fb4b65509ac884a453580b5b44653faf5e96532b6c3ea0f57bd3be71e94a38d53133d69733b18d2b7431b61e41",
		"NVMe1R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 LGMrUdSZcAznq8elf2/zdDiW2Dkfhxiol41aFDth84UR8kqyN0PgniI/dB1Kq2j1",
		"7b69b11e21cd23f626cc3f1417abbdcf5c9295e080f455e1a62502c73ff924475ed658280a2248223b22249250348969"},
	{uuidHost, exampleSub, 1, DerivationRFC8446,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9d",
		"NVMe1R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 OwseBewaGaL7Nihs6L7HCktHxtB1+5Q9v2ptTDu/pUs=",
		"118eba79f468a87553c2de3cbde6246144c63102bff613c933346c5ab49de895"},
	{uuidHost, exampleSub, 1, DerivationRFC8446,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9da0a3a6a9acafb2b5b8bbbec1c4c7cacd",
		"NVMe1R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 0UDDvPtZjVXCDYu/XxTW961wNITAk2e1VN5iE/7SKSWw5uwXOom0i7r+51nRV0Qi",
		"3d90c4586fd699b8ec342f57fc0f3b1a6f40b767415f2f916cf8f0262d094e0c181d855e8f2899b82597586a97dde34e"},
	{testHost, testSub, 0, DerivationCompat,
		"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
		"ad4cdadfcbaf4e353fcbd09aac891c4d75c5300fe5ee7bb04ae87726a312eddc",
		"NVMe0R01 nqn.psk-test-host nqn.psk-test-subsys",
		"09fb1983ac6d6d0353e7cae4f23daddd651c367fa347c59d9cf6936f5a83eafb"},
	{testHost, testSub, 0, DerivationCompat,
		"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:",
		"12d2452bc4783f50286bf940ad1caa05a304065e379024d9278ca7c9d8a42400c47029f198bfcdf5f14c07cb04eb7306",
		"NVMe0R02 nqn.psk-test-host nqn.psk-test-subsys",
		"2ee4754186a625b28a3936ef4a40d839c3ad958b2e017562ee07e2501f172ce999dc9c29033ea7ee33f814f192c13f47"},
	{uuidHost, exampleSub, 0, DerivationCompat,
		"NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"0e3e636d5fa60b693be6118258ba1dcfc45f29512f73a010cf323e429592ec7c",
		"NVMe0R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"947ae3d69f2ba9c23d13473e4a749f12dd3758eb445622171c03a9cdace4db0e"},
	{uuidHost, exampleSub, 0, DerivationCompat,
		"NVMeTLSkey-1:02:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"57b2d8c734081c312f1caf57e8e205b1f818edce0c0745e0573408e312edddf6846d0ab593f9a983c3c9c37bb17a2ef9",
		"NVMe0R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"d43103424555af468efdae550aefbfb3d49ac8e040768b7741ff54f5560fcae005b5d2024ec6c4da9d4bd1c2e1e61620"},
	{uuidHost, exampleSub, 0, DerivationCompat,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9d",
		"NVMe0R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"d0066ebece7563df81a6befaa9533c10f7cf70654799fd3927e6b1a62dc4ded4"},
	{uuidHost, exampleSub, 0, DerivationCompat,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9da0a3a6a9acafb2b5b8bbbec1c4c7cacd",
		"NVMe0R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7",
		"07ef738556428c0368bae41724c6526385ca01d703b31710e729b81299ea5fd32e502b36550f3c030d422d97511a1773"},
	{testHost, testSub, 1, DerivationCompat,
		"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
		"ad4cdadfcbaf4e353fcbd09aac891c4d75c5300fe5ee7bb04ae87726a312eddc",
		"NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys 66GuqV08TsAGII39teWUfwQwizjv06Jy8jOcX3NAAzM=",
		"b9f5ab2a41ba6e72a23a12066302a2f775fa6c0942c8e0b18ca8ac07edf305e2"},
	{testHost, testSub, 1, DerivationCompat,
		"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:",
		"12d2452bc4783f50286bf940ad1caa05a304065e379024d9278ca7c9d8a42400c47029f198bfcdf5f14c07cb04eb7306",
		"NVMe1R02 nqn.psk-test-host nqn.psk-test-subsys RsKmYJ3nAn1ApjjMloJFbAkLPivONDAX/xW327YBUsn2eGShXSjCZvBaOxscLqmz",
		"fcefe2e2a2e682b1447dcabf1ec268f78f08c63cd075753abcc8bda2c5c34d48d3014aa8d76ad80107e4f5c9f27e2149"},
	{uuidHost, exampleSub, 1, DerivationCompat,
		"NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"0e3e636d5fa60b693be6118258ba1dcfc45f29512f73a010cf323e429592ec7c",
		"NVMe1R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 8AX4wcn/tqJTFfAZrBzha3U1JG2IR7+eekiWoFy8G1Q=",
		"a28d490675989ca9e3840181eccf5260c125bd441b4a8ee23a2307061cdeea9b"},
	{uuidHost, exampleSub, 1, DerivationCompat,
		"NVMeTLSkey-1:02:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"57b2d8c734081c312f1caf57e8e205b1f818edce0c0745e0573408e312edddf6846d0ab593f9a983c3c9c37bb17a2ef9",
		"NVMe1R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 a02s0LsqPSmfDS7WeECn6B6K40utxhmChqLf5Nufj7wzDaYo5uLQ785qd4Hhx3Wt",
		"f2d2ecd976bedce7a53287b7c99fec302027268776437ecde918ad35379b1085b49c197dee0aacccc5a8a40cd58f6257"},
	{uuidHost, exampleSub, 1, DerivationCompat,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9d",
		"NVMe1R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 OwseBewaGaL7Nihs6L7HCktHxtB1+5Q9v2ptTDu/pUs=",
		"6715bfc7050a979a50e0a07f64be24e95f05c3260bdbbc0792c00b0f62d6774a"},
	{uuidHost, exampleSub, 1, DerivationCompat,
		"NVMeTLSkey-1:00:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"404346494c4f5255585b5e6164676a6d707376797c7f8285888b8e9194979a9da0a3a6a9acafb2b5b8bbbec1c4c7cacd",
		"NVMe1R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 0UDDvPtZjVXCDYu/XxTW961wNITAk2e1VN5iE/7SKSWw5uwXOom0i7r+51nRV0Qi",
		"b1375a1f1440070582fa07d1e8371e5a405814cfd80e96efaf87eb3e3bc517400ddf9cdfd15cccd8febb21f0fa62e296"},
	// libnvme 1.8 (tag v1.8, built the same way; its derive_nvme_keys() has
	// no compat argument): version 1 takes the whole identity as context.
	{testHost, testSub, 1, DerivationLibnvme17,
		"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
		"ad4cdadfcbaf4e353fcbd09aac891c4d75c5300fe5ee7bb04ae87726a312eddc",
		"NVMe1R01 nqn.psk-test-host nqn.psk-test-subsys 66GuqV08TsAGII39teWUfwQwizjv06Jy8jOcX3NAAzM=",
		"3a18e5f719d469d055102758a9c3c3a2f6f4e856f11c54d4c350adfa449d8a3c"},
	{testHost, testSub, 1, DerivationLibnvme17,
		"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:",
		"12d2452bc4783f50286bf940ad1caa05a304065e379024d9278ca7c9d8a42400c47029f198bfcdf5f14c07cb04eb7306",
		"NVMe1R02 nqn.psk-test-host nqn.psk-test-subsys RsKmYJ3nAn1ApjjMloJFbAkLPivONDAX/xW327YBUsn2eGShXSjCZvBaOxscLqmz",
		"62cfd49ace938d85965c3d3950aaa1ecbc7749b4e72fdad220be08d22173e8ba047705c9b43b0166f6f97941372f5d7f"},
	{uuidHost, exampleSub, 1, DerivationLibnvme17,
		"NVMeTLSkey-1:01:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp28JD1Z:",
		"0e3e636d5fa60b693be6118258ba1dcfc45f29512f73a010cf323e429592ec7c",
		"NVMe1R01 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 8AX4wcn/tqJTFfAZrBzha3U1JG2IR7+eekiWoFy8G1Q=",
		"3818ba12d1bd694fb95830c7b4db85287856774e25e1acefa24309ed54da23b1"},
	{uuidHost, exampleSub, 1, DerivationLibnvme17,
		"NVMeTLSkey-1:02:QENGSUxPUlVYW15hZGdqbXBzdnl8f4KFiIuOkZSXmp2go6aprK+ytbi7vsHEx8rN6JwNNQ==:",
		"57b2d8c734081c312f1caf57e8e205b1f818edce0c0745e0573408e312edddf6846d0ab593f9a983c3c9c37bb17a2ef9",
		"NVMe1R02 nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6 nqn.2024-06.io.example:tank.vol7 a02s0LsqPSmfDS7WeECn6B6K40utxhmChqLf5Nufj7wzDaYo5uLQ785qd4Hhx3Wt",
		"79922aff8ebd838c0b80890895eb643fc7789dea1488f587dce7a40fbe42c02ab0b7ace38c00d5f1e915498ae6924e36"},
}

var nvmeCLIKeys = []struct {
	key  string
	hash Hash
	crc  uint32
}{
	{"NVMeTLSkey-1:01:Z22TGQRbEP9HxrTbbqBd17HxRwkP1uPi/yLHTL0b1pOADANd:", HashSHA256, 0x5d030c80},
	{"NVMeTLSkey-1:01:sMulqCtwdy1uvwhRhC3SgU8k1a89eq7dvsw2CIrqFx9kg+s2:", HashSHA256, 0x36eb8364},
	{"NVMeTLSkey-1:02:NaFNhDLxnWAySvFp4TjSr4/lct1zmxfw8U471Cb/pp2RRxhagb+KFr5PeY9NKbWCKxPg+Q==:", HashSHA384, 0xf9e0132b},
	{"NVMeTLSkey-1:02:54/3IlgqDXKxiYjClHj4I47iNGcbByF9ADL0JfsOyK2lZhLCARdoYgedpVw51kGfjmS10Q==:", HashSHA384, 0xd1b5648e},
	// libnvme's test keys, checked by the same command.
	{"NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", HashSHA256, 0xd9baf45f},
	{"NVMeTLSkey-1:02:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwP/w0S89ELi3W2LxIcLXVsDn8kXZQ==:", HashSHA384, 0x6517c99f},
}

var kernelKATs = []struct {
	hash               Hash
	sessionKey, c1, c2 []byte
	host, sub          string
	generated          string
	identity           string
	tlsPSK, tlsPSK614  string
}{
	{HashSHA256, seq(32, 'A', 1), seq(32, 0, 1), seq(32, 0xff, -1), "hostnqn", "subsysnqn",
		"1733c59fa7f48fcf37f5f26fc4ff0268ad4f78e030f4f3b0bfd1d47e7bb1447a",
		"NVMe1G01 hostnqn subsysnqn OldoKuTfKddMuyCznAZojkWD7P4D9/AtzDzLimtOxqI=",
		"3c17da628474a04d2247c4cab47968c915388193f7c071bd9489cc3666cd7cc8",
		"bfc8def3bb5120bf5c99d6c8d54d61b3efcf3ebece1f00b93a1324c75d749364"},
	{HashSHA384, seq(48, 'A', 1), seq(48, 0, 1), seq(48, 0xff, -1), "hostnqn", "subsysnqn",
		"f14b2dd3234c459694d3bc63f8968bd6b37c2c6de849e22e118749001ce4bbe8640b9e3a748cb11ce4b1d71d359cce39",
		"NVMe1G02 hostnqn subsysnqn cffMWk8TSS7HOQebjgYEIkrPrjWPV4JE5cdPB8WhEvY4JBW5YynKyv66XscN4A9n",
		"2774753233537b3fa50eb7d16a8e43457d85f4906c005b2236616c5d80939d0898fff15bb8b77119d2be0aac423e7590",
		"87a06ece47db98f7b1fe32e7f7376cecc25228d3a0bcfbf7a0982fe63a29f2bb1d2abb916fdf6e16f5d1b9bb13419920"},
	{HashSHA256, seq(256, 1, 5), seq(32, 0x10, 1), seq(32, 0xc0, -1), uuidHost, exampleSub,
		"12d9db0ef12ff2c6a10e44c4efa2f346881bce0b42a79ff35ef4622f9556ed4c",
		"NVMe1G01 " + uuidHost + " " + exampleSub + " uHpg2pIWOLLwWRO80s2exyCDaCKYLja0qbdHKuMiF+E=",
		"a20f248030d9a49af14945a5a55c1a917da155e412868fbfc08a61c9739845af",
		"311f7aa0f815e9d285edb083dc7f08199c81d3ca6502cba810e903dd3a807fac"},
	{HashSHA384, seq(256, 1, 5), seq(48, 0x10, 1), seq(48, 0xc0, -1), uuidHost, exampleSub,
		"519ccd2522436131d171086c01fc38d776bf5bf61515ab11b63c2c0fb66b3ec86bb178e6ce45cf7c34b060e52e4e9dfe",
		"NVMe1G02 " + uuidHost + " " + exampleSub + " 4XTK+Nre7gA9rP/DDGJGxIaLytc9qYlBHxe7v4eJH1ErHy83oht5m2b3IfwaJ5Xf",
		"ce5904bd2798ce10a9aeeebb933c20e105b0c7205a5ba492b40a49f4a0b908647eb234fdd26ad8be0fb8b1502785cc40",
		"9532db55ea823f2a5eef0892098fe10ced322839e3fa189ead5d83893d534b982095774070e2c4e7fac5deff9e50c06f"},
}

// seq is n bytes, the first start, each next step more (mod 256).
func seq(n int, start byte, step int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i*step)
	}
	return b
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLibnvmeKnownAnswers(t *testing.T) {
	for i, k := range libnvmeKATs {
		t.Run(fmt.Sprintf("%d-v%d-%v", i, k.version, k.d), func(t *testing.T) {
			key, err := ParseConfiguredPSK(k.key)
			if err != nil {
				t.Fatal(err)
			}
			if key.Encode() != k.key {
				t.Errorf("Encode = %s", key.Encode())
			}
			retained, err := key.RetainedPSK(k.host, k.d)
			if err != nil || hex.EncodeToString(retained) != k.retained {
				t.Errorf("retained PSK = %x, %v; want %s", retained, err, k.retained)
			}
			id, psk, err := HostPSK(key, k.version, k.host, k.sub, k.d)
			if err != nil {
				t.Fatal(err)
			}
			if id.String() != k.identity {
				t.Errorf("identity = %q, want %q", id, k.identity)
			}
			if hex.EncodeToString(psk) != k.tlsPSK {
				t.Errorf("TLS PSK = %x, want %s", psk, k.tlsPSK)
			}
			// What a controller computes from the same key and the offered identity.
			got, err := ServerPSK(key, k.identity, k.host, k.sub, k.d)
			if err != nil || hex.EncodeToString(got) != k.tlsPSK {
				t.Errorf("ServerPSK = %x, %v; want %s", got, err, k.tlsPSK)
			}
		})
	}
}

func TestNvmeCLIKeys(t *testing.T) {
	for _, k := range nvmeCLIKeys {
		key, err := ParseConfiguredPSK(k.key + "\n")
		if err != nil {
			t.Fatalf("%s: %v", k.key, err)
		}
		if key.Transform() != k.hash || len(key.Bytes()) != k.hash.Size() {
			t.Errorf("%s: HH %v, %d bytes", k.key, key.Transform(), len(key.Bytes()))
		}
		if crc := crc32.ChecksumIEEE(key.Bytes()); crc != k.crc {
			t.Errorf("%s: CRC %08x, nvme check-tls-key says %08x", k.key, crc, k.crc)
		}
		if key.Encode() != k.key {
			t.Errorf("Encode = %s, want %s", key.Encode(), k.key)
		}
	}
}

func TestKernelKnownAnswers(t *testing.T) {
	for i, k := range kernelKATs {
		t.Run(fmt.Sprintf("%d-%v", i, k.hash), func(t *testing.T) {
			gen, err := GeneratedPSK(k.hash, k.sessionKey, k.c1, k.c2)
			if err != nil || hex.EncodeToString(gen) != k.generated {
				t.Fatalf("generated PSK = %x, %v; want %s", gen, err, k.generated)
			}
			id, err := GeneratedIdentity(k.hash, gen, k.host, k.sub)
			if err != nil || id.String() != k.identity {
				t.Fatalf("identity = %q, %v; want %q", id, err, k.identity)
			}
			for d, want := range map[Derivation]string{DerivationRFC8446: k.tlsPSK, DerivationLinux614: k.tlsPSK614} {
				psk, err := TLSPSK(gen, id, d)
				if err != nil || hex.EncodeToString(psk) != want {
					t.Errorf("%v TLS PSK = %x, %v; want %s", d, psk, err, want)
				}
			}
			parsed, err := ParseIdentity(k.identity)
			if err != nil || parsed != id {
				t.Errorf("ParseIdentity = %+v, %v; want %+v", parsed, err, id)
			}
		})
	}
}

// The kernel's KUnit test also pins the generated PSK for SHA-512, from
// which Linux derives nothing further; neither does this package.
func TestGeneratedPSKRefusesSHA512(t *testing.T) {
	if _, err := GeneratedPSK(Hash(3), seq(64, 'A', 1), seq(64, 0, 1), seq(64, 0xff, -1)); err == nil {
		t.Error("SHA-512 accepted")
	}
}
