package dhchap

import (
	"errors"
	"fmt"
	"io"
	"math/big"
	"sync"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Group is a finite-field Diffie-Hellman group of RFC 7919, generator 2.
type Group struct {
	ID   uint8
	Name string
	Bits int
	// strength is the group's estimated security in bits (RFC 7919 §5.1);
	// private exponents are twice as long, as the Linux kernel draws them.
	strength int
	x        int64 // RFC 7919's X: the offset that makes p a safe prime

	once sync.Once
	p, q *big.Int // q = (p-1)/2
}

// The groups are defined by a formula on the digits of e (RFC 7919
// Appendix A); deriving them beats pasting a thousand hex digits, and a
// test checks each result is the safe prime the RFC names.
var groups = []*Group{
	{ID: nvme.DHGroup2048, Name: "ffdhe2048", Bits: 2048, strength: 112, x: 560316},
	{ID: nvme.DHGroup3072, Name: "ffdhe3072", Bits: 3072, strength: 128, x: 2625351},
	{ID: nvme.DHGroup4096, Name: "ffdhe4096", Bits: 4096, strength: 152, x: 5736041},
	{ID: nvme.DHGroup6144, Name: "ffdhe6144", Bits: 6144, strength: 176, x: 15705020},
	{ID: nvme.DHGroup8192, Name: "ffdhe8192", Bits: 8192, strength: 200, x: 10965728},
}

// GroupByID returns the FFDHE group with id, or nil (also for the null group).
func GroupByID(id uint8) *Group {
	for _, g := range groups {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// GroupName is the configuration name of a group ID.
func GroupName(id uint8) string {
	if id == nvme.DHGroupNull {
		return "null"
	}
	if g := GroupByID(id); g != nil {
		return g.Name
	}
	return fmt.Sprintf("dhgroup(%d)", id)
}

// GroupByName is the ID of a group name; ok is false for an unknown name.
func GroupByName(name string) (uint8, bool) {
	if name == "null" {
		return nvme.DHGroupNull, true
	}
	for _, g := range groups {
		if g.Name == name {
			return g.ID, true
		}
	}
	return 0, false
}

// P is the group's prime.
func (g *Group) P() *big.Int {
	g.once.Do(g.derive)
	return g.p
}

// Size is the length of public values and of the shared secret in bytes.
func (g *Group) Size() int { return g.Bits / 8 }

// derive computes p = 2^b - 2^(b-64) + (floor(2^(b-130) e) + X) 2^64 - 1.
func (g *Group) derive() {
	b := uint(g.Bits)
	e := eFixed(b - 130)
	p := new(big.Int).Lsh(big.NewInt(1), b)
	p.Sub(p, new(big.Int).Lsh(big.NewInt(1), b-64))
	e.Add(e, big.NewInt(g.x))
	p.Add(p, e.Lsh(e, 64))
	p.Sub(p, big.NewInt(1))
	g.p = p
	g.q = new(big.Int).Rsh(p, 1)
}

// eFixed returns floor(2^n e), summing 1/k! with guard bits.
func eFixed(n uint) *big.Int {
	const guard = 64
	one := new(big.Int).Lsh(big.NewInt(1), n+guard)
	sum := new(big.Int).Set(one)
	term := new(big.Int).Set(one)
	for k := int64(1); term.Sign() > 0; k++ {
		term.Quo(term, big.NewInt(k))
		sum.Add(sum, term)
	}
	return sum.Rsh(sum, guard)
}

// GenerateKey draws a private exponent and returns it with the public
// value g^x mod p, big-endian and left-padded to Size bytes as Linux sends it.
func (g *Group) GenerateKey(rand io.Reader) (priv *big.Int, pub []byte, err error) {
	limit := new(big.Int).Lsh(big.NewInt(1), uint(2*g.strength))
	priv, err = randInt(rand, limit)
	if err != nil {
		return nil, nil, err
	}
	y := new(big.Int).Exp(big.NewInt(2), priv, g.P())
	return priv, y.FillBytes(make([]byte, g.Size())), nil
}

func randInt(rand io.Reader, limit *big.Int) (*big.Int, error) {
	b := make([]byte, (limit.BitLen()+7)/8)
	for {
		if _, err := io.ReadFull(rand, b); err != nil {
			return nil, err
		}
		v := new(big.Int).SetBytes(b)
		clear(b)
		v.Mod(v, limit)
		if v.Cmp(big.NewInt(1)) > 0 {
			return v, nil
		}
	}
}

// ErrPublicValue reports a peer's DH value outside the group.
var ErrPublicValue = errors.New("DH public value not in the group")

// SharedSecret is the session key: peer^priv mod p, big-endian, left-padded
// to Size bytes. The peer's value must lie in 2..p-2 and in the prime-order
// subgroup, as the Linux kernel checks. The caller clears the result.
func (g *Group) SharedSecret(priv *big.Int, peer []byte) ([]byte, error) {
	p := g.P()
	if len(peer) != g.Size() {
		return nil, ErrPublicValue
	}
	y := new(big.Int).SetBytes(peer)
	pm1 := new(big.Int).Sub(p, big.NewInt(1))
	if y.Cmp(big.NewInt(1)) <= 0 || y.Cmp(pm1) >= 0 {
		return nil, ErrPublicValue
	}
	// y^q mod p = 1 for the safe prime p = 2q+1 says y is a quadratic
	// residue, which the Jacobi symbol tells without the full-size
	// exponentiation (under emulation, seconds for ffdhe8192).
	if big.Jacobi(y, p) != 1 {
		return nil, ErrPublicValue
	}
	z := new(big.Int).Exp(y, priv, p)
	out := z.FillBytes(make([]byte, g.Size()))
	ClearInt(z)
	return out, nil
}

// ClearInt overwrites a private exponent's words.
func ClearInt(v *big.Int) {
	if v != nil {
		clear(v.Bits())
		v.SetInt64(0)
	}
}
