package ctl

import (
	"flag"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/api"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// hostsFlag reads -hosts: a comma-separated list of host NQNs; given
// empty (-hosts=), no host sees the namespace.
func hostsFlag(fs *flag.FlagSet, to **[]string) {
	fs.Func("hosts", "limit the namespace to these host `NQNs`, comma-separated; empty (-hosts=): no host sees it until one is added", func(s string) error {
		hosts := []string{}
		if s != "" {
			hosts = strings.Split(s, ",")
		}
		*to = &hosts
		return nil
	})
}

func namespaceHostFlags(method string) func(*flag.FlagSet) func([]string) (*Command, error) {
	return func(*flag.FlagSet) func([]string) (*Command, error) {
		return func(pos []string) (*Command, error) {
			nsid, err := parseNSID(pos[1])
			if err != nil {
				return nil, err
			}
			return ctlEdit(method, api.NamespaceHostParams{NQN: pos[0], NSID: nsid, Host: pos[2]})
		}
	}
}

// listHosts is ctl list's note on a limited namespace.
func listHosts(hosts *[]string) string {
	if hosts == nil {
		return ""
	}
	safe := []string{}
	for _, h := range *hosts {
		safe = append(safe, termSafe(h))
	}
	return ", hosts: " + config.DescribeHosts(&safe)
}
