package config

import "testing"

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"512", 512},
		{"4096B", 4096},
		{"64KiB", 64 << 10},
		{"512MiB", 512 << 20},
		{"1GiB", 1 << 30},
		{"1TiB", 1 << 40},
		{"100MB", 100e6},
		{"1GB", 1e9},
		{"2TB", 2e12},
		{"7K", 7 << 10},
		{"1G", 1 << 30},
		{"3T", 3 << 40},
		{" 8 MiB ", 8 << 20},
		{"4194304TiB", 4194304 << 40}, // the largest: 4 EiB
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if err != nil || int64(got) != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseSizeRejects(t *testing.T) {
	for _, in := range []string{"", "-1", "-1GiB", "1XB", "GiB", "1.5GiB", "1e9", "0x100", "1gib", "1 2", "4194305TiB", "99999999999999999999"} {
		t.Run(in, func(t *testing.T) {
			if got, err := ParseSize(in); err == nil {
				t.Fatalf("ParseSize(%q) = %d, want an error", in, got)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	cases := []struct {
		in   Size
		want string
	}{
		{0, "0"},
		{1000, "1000"},
		{3072, "3KiB"},
		{1 << 30, "1GiB"},
		{1536 << 20, "1536MiB"},
		{5 << 40, "5TiB"},
		{100e6, "100000000"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.in.String(); got != tc.want {
				t.Fatalf("Size(%d).String() = %q, want %q", int64(tc.in), got, tc.want)
			}
		})
	}
}
