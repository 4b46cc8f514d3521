package metrics

import (
	"strconv"

	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the gateway group: each group's lease state and its
// runner's counters.
var (
	dGatewayState     = prometheus.NewDesc(prefix+"gateway_lease_state", "Each gateway group's lease here: 1 for the current state (owner: optimized here; standby: another gateway owns it or nobody yet; blocklisted: the group's RADOS client was fenced, and is being rebuilt), 0 for the others.", []string{"group", "state"}, nil)
	dGatewayTakeovers = prometheus.NewDesc(prefix+"gateway_takeovers_total", "Times this daemon took a gateway group's lease.", []string{"group"}, nil)
	dGatewayFencings  = prometheus.NewDesc(prefix+"gateway_fencings_total", "Previous owners of a gateway group this daemon fenced (blocklisted) before serving it.", []string{"group"}, nil)
	dGatewayFailbacks = prometheus.NewDesc(prefix+"gateway_failbacks_total", "Times this daemon handed a gateway group back to its preferred gateway (a failback's planned release).", []string{"group"}, nil)
)

func describeGateway(ch chan<- *prometheus.Desc) {
	ch <- dGatewayState
	ch <- dGatewayTakeovers
	ch <- dGatewayFencings
	ch <- dGatewayFailbacks
	describeGatewayRebuilds(ch)
	ch <- dGatewayMembers
	ch <- dGatewayConfigVersion
}

func collectGateway(e emit, statuses func() []gateway.Status) {
	if statuses == nil {
		return
	}
	for _, st := range statuses() {
		g := strconv.FormatUint(uint64(st.Group), 10)
		for _, s := range gateway.States {
			v := 0.0
			if s == st.State {
				v = 1
			}
			e.gauge(dGatewayState, v, g, s.String())
		}
		e.counter(dGatewayTakeovers, float64(st.Takeovers), g)
		e.counter(dGatewayFencings, float64(st.Fencings), g)
		e.counter(dGatewayFailbacks, float64(st.Failbacks), g)
		collectGatewayRebuilds(e, st, g)
	}
}

var (
	dGatewayRebuilds        = prometheus.NewDesc(prefix+"gateway_rebuilds_total", "Times this daemon rebuilt a gateway group's blocklisted RADOS client (a new client instance, the group's images reopened) and stood by again.", []string{"group"}, nil)
	dGatewayRebuildFailures = prometheus.NewDesc(prefix+"gateway_rebuild_failures_total", "Rebuilds of a gateway group's blocklisted RADOS client that failed; each is tried again after a back-off of up to a minute.", []string{"group"}, nil)
)

func describeGatewayRebuilds(ch chan<- *prometheus.Desc) {
	ch <- dGatewayRebuilds
	ch <- dGatewayRebuildFailures
}

func collectGatewayRebuilds(e emit, st gateway.Status, g string) {
	e.counter(dGatewayRebuilds, float64(st.Rebuilds), g)
	e.counter(dGatewayRebuildFailures, float64(st.RebuildFailures), g)
}

// GroupView is what a gateway knows of its group as a whole.
type GroupView struct {
	Members       int    // the gateways up, with balancing (0 without)
	ConfigVersion uint64 // the shared configuration's version applied here (0 without)
}

var (
	dGatewayMembers       = prometheus.NewDesc(prefix+"gateway_members", "The gateways of the group that are up, as this gateway last read them (balancing: gateway.balance).", nil, nil)
	dGatewayConfigVersion = prometheus.NewDesc(prefix+"gateway_config_version", "The version of the gateway group's shared configuration applied here (gateway.shared_config): a gateway behind the others has not applied a change.", nil, nil)
)

func collectGroup(e emit, view func() GroupView) {
	if view == nil {
		return
	}
	v := view()
	if v.Members > 0 {
		e.gauge(dGatewayMembers, float64(v.Members))
	}
	if v.ConfigVersion > 0 {
		e.gauge(dGatewayConfigVersion, float64(v.ConfigVersion))
	}
}
