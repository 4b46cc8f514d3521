// Package dist holds what operators install beside the daemon, and its
// tests: the systemd unit (nvmeof-tgt.service), the Prometheus alert
// rules and scrape job, the Grafana dashboard, and build-deb.sh, which
// packages them with the binary and an example configuration as a
// Debian package. The package has no code; its tests build a package and
// check what it installs.
package dist
