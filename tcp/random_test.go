package tcp

import (
	"math/rand"
	"testing"
	"time"
)

// Random PDU streams, mutated from valid starts of a connection (bytes
// changed, cut short, spliced): the connection always ends, is torn down,
// and gives every buffer back. FuzzConnection does the same from the
// fuzzer's inputs; this runs a fixed, repeatable set on every test run.
func TestRandomPDUStreams(t *testing.T) {
	l := targetListener(t)
	rng := rand.New(rand.NewSource(1))
	seeds := [][]byte{seedStream(0), seedStream(3)}
	for i := range 2000 {
		s := seeds[i%2]
		stream := append([]byte(nil), s...)
		for k := rng.Intn(4); k >= 0; k-- {
			switch rng.Intn(3) {
			case 0:
				stream[rng.Intn(len(stream))] = byte(rng.Intn(256))
			case 1:
				stream = stream[:rng.Intn(len(stream))+1]
			case 2:
				j := rng.Intn(len(stream))
				stream = append(stream[:j:j], append(s[rng.Intn(len(s)):], stream[j:]...)...)
			}
		}
		start := time.Now()
		h, err := sendStream(t, l, stream, 3*time.Second)
		if err != nil {
			t.Fatalf("case %d: %v %x", i, err, stream[:min(len(stream), 300)])
		}
		for l.QueuePairs() != 0 || l.srv.pool.Lent() != 0 {
			if time.Since(start) > 3*time.Second {
				t.Fatalf("case %d: %d open", i, l.QueuePairs())
			}
			time.Sleep(time.Millisecond)
		}
		h.c.Close()
	}
}
