package config

import "strings"

// DescribeHosts says who sees a namespace whose hosts list is hosts (nil:
// every allowed host), for logs and ctl list.
func DescribeHosts(hosts *[]string) string {
	switch {
	case hosts == nil:
		return "every allowed host"
	case len(*hosts) == 0:
		return "no host"
	}
	return strings.Join(*hosts, ", ")
}
