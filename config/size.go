package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// sizeUnits maps suffixes (case-sensitive) to multipliers: KiB/MiB/GiB/TiB
// and the bare K/M/G/T are powers of 1024, as storage tools use them;
// KB/MB/GB/TB are powers of 1000. Longer suffixes come first so that "MiB"
// is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// maxSize (4 EiB, inclusive) keeps sizes and their arithmetic well inside
// int64.
const maxSize = 1 << 62

// ParseSize reads a byte count such as 4096, "4096B", "512MiB" or "100GB".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q (want a byte count such as 4096, 512MiB or 1GiB)", s)
	}
	if n > 0 && mult > maxSize/n {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(n * mult), nil
}

// UnmarshalYAML accepts an integer or a human size string.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	return decodeScalar(n, s, ParseSize, "size must be a number or a string such as 1GiB")
}

// MarshalYAML writes the most compact exact form: "1GiB", or a plain
// integer when no binary unit divides the size.
func (s Size) MarshalYAML() (any, error) {
	if str := s.String(); strings.HasSuffix(str, "B") {
		return str, nil
	}
	return int64(s), nil
}

// String is the most compact exact form: "1GiB", "3KiB" or "1000".
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s != 0 && int64(s)%u.mult == 0 {
			return strconv.FormatInt(int64(s)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}
