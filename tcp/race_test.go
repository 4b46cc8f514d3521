//go:build race

package tcp

// raceEnabled: the race detector's own bookkeeping allocates on the paths
// the allocation tests count.
const raceEnabled = true
