package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Warnings lists what is valid but likely a mistake, each as "field path:
// what and why", for `-check` to print and the daemon to log at start and
// reload. c must be valid, with defaults applied.
func (c *Config) Warnings() []string {
	var out []string
	for i, s := range c.Subsystems {
		if w := sharedWithoutANA(c, fmt.Sprintf("subsystems[%d]", i), s); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// sharedWithoutANA warns about a subsystem reached by several paths (more
// than one port, or a controller ID range that leaves room for another
// daemon) while every path reports every namespace optimized: no port
// sets an ANA state and every namespace is in the default group. The
// Linux host then spreads I/O over all paths (numa or round-robin), which
// is not what a standby path is for.
func sharedWithoutANA(c *Config, path string, s Subsystem) string {
	ports := s.Ports
	if len(ports) == 0 {
		for _, p := range c.Ports {
			ports = append(ports, p.ID)
		}
	}
	for _, p := range c.Ports {
		if slices.Contains(ports, p.ID) && len(p.ANA) > 0 {
			return ""
		}
	}
	// A gateway group's paths follow its lease; the other namespaces
	// are what the warning is about.
	gatewayOnly := len(s.Namespaces) > 0
	for _, ns := range s.Namespaces {
		switch {
		case c.Gateway.HasGroup(ns.Group()):
		case ns.Group() != DefaultANAGroup:
			return ""
		default:
			gatewayOnly = false
		}
	}
	if gatewayOnly {
		return ""
	}
	const why = "no port sets an ANA state and every namespace is in ANA group 1, so hosts see every path as optimized and spread I/O over all of them; " +
		"set ports[].ana (non_optimized or inaccessible on the standby path), or ana: {1: optimized} on the ports if the paths are meant to be equal"
	if len(ports) > 1 {
		ids := make([]string, len(ports))
		for i, id := range ports {
			ids[i] = fmt.Sprint(id)
		}
		which := "ports " + strings.Join(ids, ", ")
		if len(s.Ports) == 0 {
			which = "every port (" + strings.Join(ids, ", ") + ")"
		}
		return fmt.Sprintf("%s.ports: served on %s, but %s", path, which, why)
	}
	lo, hi := s.CntlidRange()
	if lo == nvme.MinControllerID && hi == nvme.MaxControllerID {
		return ""
	}
	field := path + ".cntlid_min"
	if lo == nvme.MinControllerID {
		field = path + ".cntlid_max"
	}
	return fmt.Sprintf("%s: controller IDs %d..%d leave room for another daemon serving this subsystem, but %s", field, lo, hi, why)
}
