package dhchap

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"strings"
	"testing"
)

// The first and last 64 bits of every RFC 7919 prime are all ones; the
// words next to them are the RFC's (Appendix A), and p and (p-1)/2 must be
// prime. A wrong X or a wrong digit of e fails all three.
func TestGroupsAreRFC7919(t *testing.T) {
	want := map[string][2]string{
		"ffdhe2048": {"ffffffffffffffffadf85458a2bb4a9a", "886b423861285c97ffffffffffffffff"},
		"ffdhe3072": {"ffffffffffffffffadf85458a2bb4a9a", "25e41d2b66c62e37ffffffffffffffff"},
		"ffdhe4096": {"ffffffffffffffffadf85458a2bb4a9a", "c68a007e5e655f6affffffffffffffff"},
		"ffdhe6144": {"ffffffffffffffffadf85458a2bb4a9a", "a40e329cd0e40e65ffffffffffffffff"},
		"ffdhe8192": {"ffffffffffffffffadf85458a2bb4a9a", "d68c8bb7c5c6424cffffffffffffffff"},
	}
	for _, g := range groups {
		t.Run(g.Name, func(t *testing.T) {
			p := g.P()
			if p.BitLen() != g.Bits {
				t.Fatalf("%d bits", p.BitLen())
			}
			h := fmt.Sprintf("%x", p)
			if w := want[g.Name]; !strings.HasPrefix(h, w[0]) || !strings.HasSuffix(h, w[1]) {
				t.Fatalf("p = %s…%s", h[:32], h[len(h)-32:])
			}
			if !p.ProbablyPrime(1) || !g.q.ProbablyPrime(1) {
				t.Fatal("not a safe prime")
			}
		})
	}
}

func TestDHAgreement(t *testing.T) {
	for _, g := range groups[:2] {
		a, pa, err := g.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		b, pb, _ := g.GenerateKey(rand.Reader)
		ka, err1 := g.SharedSecret(a, pb)
		kb, err2 := g.SharedSecret(b, pa)
		if err1 != nil || err2 != nil || string(ka) != string(kb) || len(ka) != g.Size() {
			t.Fatalf("%s: %v %v", g.Name, err1, err2)
		}
		bad := make([]byte, g.Size())
		bad[len(bad)-1] = 1
		if _, err := g.SharedSecret(a, bad); err == nil {
			t.Fatalf("%s: accepted 1 as a public value", g.Name)
		}
		pm1 := new(bigInt).Sub(g.P(), one()).FillBytes(make([]byte, g.Size()))
		if _, err := g.SharedSecret(a, pm1); err == nil {
			t.Fatalf("%s: accepted p-1", g.Name)
		}
		if _, err := g.SharedSecret(a, pb[1:]); err == nil {
			t.Fatalf("%s: accepted a short value", g.Name)
		}
	}
}

type bigInt = big.Int

func one() *big.Int { return big.NewInt(1) }

// A value outside the prime-order subgroup (a quadratic non-residue) is
// refused, and the residue test agrees with y^q mod p on random values.
func TestSubgroupCheck(t *testing.T) {
	for _, g := range groups {
		p := g.P()
		a, _, err := g.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		inGroup := func(y *big.Int) bool { return new(big.Int).Exp(y, g.q, p).Cmp(one()) == 0 }
		// p ≡ 7 mod 8, so 2 is a residue and p-2 = -2 is not.
		nonResidue := new(big.Int).Sub(p, big.NewInt(2))
		if inGroup(nonResidue) {
			t.Fatalf("%s: -2 is in the subgroup", g.Name)
		}
		if _, err := g.SharedSecret(a, nonResidue.FillBytes(make([]byte, g.Size()))); err != ErrPublicValue {
			t.Fatalf("%s: accepted a value outside the subgroup: %v", g.Name, err)
		}
		for i := 0; i < 8; i++ {
			y, _ := rand.Int(rand.Reader, p)
			if y.Cmp(big.NewInt(2)) < 0 {
				continue
			}
			_, err := g.SharedSecret(a, y.FillBytes(make([]byte, g.Size())))
			if (err == nil) != inGroup(y) {
				t.Fatalf("%s: SharedSecret says %v where y^q mod p says in group %v", g.Name, err, inGroup(y))
			}
		}
	}
}

// BenchmarkDH is one side's work per authentication: a key pair and the
// shared secret with the peer's value.
func BenchmarkDH(b *testing.B) {
	for _, g := range groups {
		_, peer, _ := g.GenerateKey(rand.Reader)
		b.Run(g.Name, func(b *testing.B) {
			for b.Loop() {
				priv, _, err := g.GenerateKey(rand.Reader)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := g.SharedSecret(priv, peer); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
