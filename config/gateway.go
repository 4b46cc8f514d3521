package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
	"gopkg.in/yaml.v3"
)

// Gateway makes this daemon one of a gateway pair (or more): daemons that
// export the same rbd images in the same subsystems, where for each of
// Groups exactly one daemon, the holder of the group's lease in RADOS,
// reports the group optimized on its ports and the others report it
// inaccessible. Ports' ana keys do not set these groups.
type Gateway struct {
	// Name tells the daemons apart in logs and in the lease objects
	// (default: the host name).
	Name string `yaml:"name,omitempty"`
	// Pool and RadosNamespace hold the lease objects, one per group:
	// LeasePrefix + ".group." + the group ID. Every daemon of the pair
	// names the same.
	Pool           string `yaml:"pool"`
	RadosNamespace string `yaml:"rados_namespace,omitempty"`
	LeasePrefix    string `yaml:"lease_prefix,omitempty"` // default DefaultLeasePrefix
	// LeaseSeconds is the lease's duration: after an owner dies, a peer
	// takes its groups after at most this long, plus a renewal interval
	// (a quarter of it). Default DefaultLeaseSeconds.
	LeaseSeconds int `yaml:"lease_seconds,omitempty"`
	// Groups are the ANA groups the lease decides: a group ID, or
	// {id, preferred} to name the gateway the group returns to.
	Groups []GatewayGroup `yaml:"groups"`
	// FailbackDelay is how long, in seconds, a group's preferred gateway
	// must have stood by, ready, before the owner hands the group back to
	// it (default DefaultFailbackDelay; -1 never hands back).
	FailbackDelay int `yaml:"failback_delay,omitempty"`
	// Balance spreads the groups that name no preferred gateway over the
	// gateways that are up: each is preferred for about K/N of them, and
	// the assignment follows gateways joining and leaving. Groups move by
	// failback, so the failback delay applies.
	Balance bool `yaml:"balance,omitempty"`
	// RebalanceSeconds spaces out the groups this gateway hands over: at
	// most one per period (default DefaultRebalanceSeconds).
	RebalanceSeconds int `yaml:"rebalance_seconds,omitempty"`
	// SharedConfig keeps the subsystems in one object for the whole group,
	// LeasePrefix + ".config" in Pool (shared.go): a change through any
	// gateway reaches every gateway. The file's own subsystems are only
	// used to create the object when there is none yet.
	SharedConfig bool `yaml:"shared_config,omitempty"`
	// CntlidMin and CntlidMax are this gateway's controller IDs in every
	// shared subsystem: disjoint between the gateways of the group.
	CntlidMin uint16 `yaml:"cntlid_min,omitempty"`
	CntlidMax uint16 `yaml:"cntlid_max,omitempty"`
	// SecretKeyFile is the group's secret key, which seals the inline
	// DH-HMAC-CHAP secrets in the shared object (ReadSecretKey).
	SecretKeyFile string `yaml:"secret_key_file,omitempty"`
	// Ceph is the cluster connection: the top-level ceph block's unless
	// set. It must be the one of the rbd namespaces in Groups, so that
	// fencing this daemon's client fences their writes.
	Ceph Ceph `yaml:"ceph,omitempty"`
}

// GatewayGroup is one ANA group the lease decides. Preferred, if set, is
// the name of the gateway the group returns to (fails back to) once that
// gateway has stood by for the failback delay.
type GatewayGroup struct {
	ID        uint32 `yaml:"id"`
	Preferred string `yaml:"preferred,omitempty"`
}

type gatewayGroupFields GatewayGroup

var gatewayGroupKeys = []string{"id", "preferred"}

// UnmarshalYAML takes a plain group ID or the {id, preferred} form.
func (g *GatewayGroup) UnmarshalYAML(n *yaml.Node) error {
	return decodeShortForm(n, (*gatewayGroupFields)(g), &g.ID, "gateway group", gatewayGroupKeys)
}

// MarshalYAML writes a group without a preferred gateway as its ID alone.
func (g GatewayGroup) MarshalYAML() (any, error) {
	if g.Preferred == "" {
		return g.ID, nil
	}
	return gatewayGroupFields(g), nil
}

// GroupIDs lists the IDs of the gateway groups, in order.
func (g *Gateway) GroupIDs() []uint32 {
	if g == nil {
		return nil
	}
	ids := make([]uint32, len(g.Groups))
	for i, grp := range g.Groups {
		ids[i] = grp.ID
	}
	return ids
}

// Preferred is the preferred gateway of group id, "" if none.
func (g *Gateway) Preferred(id uint32) string {
	for _, grp := range g.Groups {
		if grp.ID == id {
			return grp.Preferred
		}
	}
	return ""
}

const (
	DefaultLeasePrefix  = "nvmeof-tgt.gateway"
	DefaultLeaseSeconds = 10
	// DefaultFailbackDelay: a restarted preferred gateway gets its groups
	// back after 15 s of standing by, several of its lease tries, so that
	// one that keeps dying at start never pulls them over.
	DefaultFailbackDelay = 15
	maxFailbackDelay     = 3600
	// DefaultRebalanceSeconds: a gateway joining a group of many gets
	// one group every 10 s, each inaccessible for a moment as it moves.
	DefaultRebalanceSeconds = 10
	maxRebalanceSeconds     = 3600
	minLeaseSeconds         = 3
	maxLeaseSeconds         = 300
)

// MembersObject is the name of the object whose shared lock the gateways
// of the group hold while they are up (balancing).
func (g *Gateway) MembersObject() string { return g.LeasePrefix + ".members" }

// BalancedGroups are the groups balancing assigns: those without a
// preferred gateway, with Balance on.
func (g *Gateway) BalancedGroups() []uint32 {
	var ids []uint32
	for _, grp := range g.Groups {
		if g.Balance && grp.Preferred == "" {
			ids = append(ids, grp.ID)
		}
	}
	return ids
}

// LeaseObject is the name of group g's lease object.
func (g *Gateway) LeaseObject(group uint32) string {
	return fmt.Sprintf("%s.group.%d", g.LeasePrefix, group)
}

// HasGroup reports whether the gateway's lease decides group g.
func (g *Gateway) HasGroup(group uint32) bool {
	return g != nil && slices.Contains(g.GroupIDs(), group)
}

func (g *Gateway) applyDefaults(top Ceph) {
	if g.LeasePrefix == "" {
		g.LeasePrefix = DefaultLeasePrefix
	}
	if g.LeaseSeconds == 0 {
		g.LeaseSeconds = DefaultLeaseSeconds
	}
	if g.FailbackDelay == 0 {
		g.FailbackDelay = DefaultFailbackDelay
	}
	if g.RebalanceSeconds == 0 {
		g.RebalanceSeconds = DefaultRebalanceSeconds
	}
	g.Ceph = g.Ceph.inherit(top).inherit(Ceph{Conf: DefaultCephConf, User: DefaultCephUser})
}

// gateway checks the gateway block and what it asks of the rest: no port
// sets the state of a gateway group, and a gateway group holds only rbd
// namespaces that reach the cluster through the gateway's connection.
func (v *validator) gateway(c *Config) {
	g := c.Gateway
	if g == nil {
		return
	}
	const path = "gateway"
	if g.Name != "" && (len(g.Name) > 64 || !printable(g.Name) || strings.ContainsAny(g.Name, " /")) {
		v.add(path+".name", "%q must be printable ASCII without spaces or /, at most 64 bytes", g.Name)
	}
	for _, f := range []struct{ key, val string }{{"pool", g.Pool}, {"rados_namespace", g.RadosNamespace}, {"lease_prefix", g.LeasePrefix}} {
		switch {
		case f.val == "" && f.key == "pool":
			v.add(path+".pool", "required: the pool that holds the lease objects")
		case len(f.val) > 200 || !printable(f.val) || strings.ContainsAny(f.val, "/@ "):
			v.add(path+"."+f.key, "%q must be printable ASCII without spaces, / or @, at most 200 bytes", f.val)
		}
	}
	if s := g.LeaseSeconds; s < minLeaseSeconds || s > maxLeaseSeconds {
		v.add(path+".lease_seconds", "%d is out of range %d..%d", s, minLeaseSeconds, maxLeaseSeconds)
	}
	if len(g.Groups) == 0 {
		v.add(path+".groups", "required: the ANA groups the lease decides")
	}
	if d := g.FailbackDelay; d != -1 && (d < 1 || d > maxFailbackDelay) {
		v.add(path+".failback_delay", "%d is out of range 1..%d seconds (-1: never hand a group back)", d, maxFailbackDelay)
	}
	if s := g.RebalanceSeconds; s < 1 || s > maxRebalanceSeconds {
		v.add(path+".rebalance_seconds", "%d is out of range 1..%d", s, maxRebalanceSeconds)
	}
	v.sharedConfig(g)
	if g.Balance && g.FailbackDelay == -1 {
		v.add(path+".balance", "balancing moves groups by failback, which failback_delay: -1 turns off; set a delay")
	}
	ids := g.GroupIDs()
	for i, grp := range g.Groups {
		gp := fmt.Sprintf("%s.groups[%d]", path, i)
		switch {
		case grp.ID < 1 || grp.ID > nvme.MaxANAGroups:
			v.add(gp+".id", "%d is out of range 1..%d", grp.ID, nvme.MaxANAGroups)
		case slices.Index(ids, grp.ID) < i:
			v.add(gp+".id", "group %d is listed twice", grp.ID)
		}
		// The name cannot be checked against the peers' configurations;
		// its form can.
		if p := grp.Preferred; p != "" && (len(p) > 64 || !printable(p) || strings.ContainsAny(p, " /")) {
			v.add(gp+".preferred", "%q must be a gateway name: printable ASCII without spaces or /, at most 64 bytes", p)
		}
	}
	v.ceph(path+".ceph", g.Ceph)
	for i, p := range c.Ports {
		for _, grp := range slices.Sorted(maps.Keys(p.ANA)) {
			if g.HasGroup(grp) {
				v.add(fmt.Sprintf("ports[%d].ana[%d]", i, grp), "ANA group %d is a gateway group: its state on every port follows the gateway lease (optimized here while this daemon owns it, inaccessible otherwise); remove it from the port", grp)
			}
		}
	}
	for i, s := range c.Subsystems {
		for j, ns := range s.Namespaces {
			np := fmt.Sprintf("subsystems[%d].namespaces[%d]", i, j)
			if !g.HasGroup(ns.Group()) {
				if ns.Backend == "rbd" {
					// The peer gateways export the same images: outside
					// a gateway group, every one of them would serve this
					// image optimized, with nothing to fence the others.
					v.add(np+".ana_group", "rbd namespace in ANA group %d, which is not a gateway group (gateway.groups: %v): every gateway of the pair serving the image would report it optimized, and none fences the others; put it in a gateway group", ns.Group(), ids)
				}
				continue
			}
			switch {
			case ns.Backend != "rbd":
				v.add(np+".backend", "%s namespace in gateway group %d: only rbd namespaces can be fenced when a gateway takes a group over; use rbd or another ANA group", ns.Backend, ns.Group())
			case ns.Ceph != g.Ceph:
				v.add(np+".ceph", "in gateway group %d, the namespace reaches the cluster as %+v but the gateway as %+v: they must be the same (conf, user and keyring) so that fencing the gateway's client fences the namespace's writes", ns.Group(), ns.Ceph, g.Ceph)
			}
		}
	}
}

// sharedConfig checks the settings of a shared configuration.
func (v *validator) sharedConfig(g *Gateway) {
	if !g.SharedConfig {
		if g.CntlidMin != 0 || g.CntlidMax != 0 || g.SecretKeyFile != "" {
			v.add("gateway.shared_config", "cntlid_min, cntlid_max and secret_key_file apply to a shared configuration only: set shared_config: true, or use the subsystems' own keys")
		}
		return
	}
	switch {
	case g.CntlidMin == 0 || g.CntlidMax == 0:
		v.add("gateway.cntlid_min", "required with shared_config: this gateway's controller IDs in every shared subsystem, disjoint from the other gateways' (a host refuses a controller ID seen twice)")
	case g.CntlidMin > g.CntlidMax || g.CntlidMax > nvme.MaxControllerID:
		v.add("gateway.cntlid_max", "%d..%d is not a range within 1..%d", g.CntlidMin, g.CntlidMax, nvme.MaxControllerID)
	}
	if f := g.SecretKeyFile; f != "" && !strings.HasPrefix(f, "/") {
		v.add("gateway.secret_key_file", "%q is not an absolute path", f)
	}
}
