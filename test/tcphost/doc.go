// Package tcphost is a raw NVMe/TCP host that misbehaves on purpose: it
// opens connections and says nothing, or connects a controller and then
// sends writes whose data it never sends and reads whose data it never
// reads. The end-to-end suite runs it (cmd/tcphost) beside a well-behaved
// Linux host to show that one host cannot stall the others.
package tcphost
