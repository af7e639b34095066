package kube

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics, served on /metrics.
type Metrics struct {
	cycles        prometheus.Counter
	cycleSeconds  prometheus.Histogram
	engineSeconds prometheus.Histogram
	binds         *prometheus.CounterVec
	evictions     *prometheus.CounterVec
	reconfigs     *prometheus.CounterVec
	pendingPods   prometheus.Gauge
	leader        prometheus.Gauge
}

// NewMetrics registers the metrics with reg (nil: a private registry,
// for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	buckets := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms .. 33 s
	m := &Metrics{
		cycles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "partita_kube_cycles_total", Help: "Scheduling cycles run.",
		}),
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_kube_cycle_seconds", Help: "Time of a whole cycle: snapshot, engine, binds, evictions, MIG changes.", Buckets: buckets,
		}),
		engineSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_kube_engine_seconds", Help: "Time the engine took to decide, per cycle.", Buckets: buckets,
		}),
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "partita_kube_binds_total", Help: "Binds through pods/binding, by result.",
		}, []string{"result"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "partita_kube_evictions_total", Help: "Evictions through the Eviction API, by result.",
		}, []string{"result"}),
		reconfigs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "partita_kube_mig_changes_total", Help: "MIG layout changes asked of the MIG manager, by result (ok, declined, invalid, error).",
		}, []string{"result"}),
		pendingPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "partita_kube_pending_pods", Help: "Pods waiting to be scheduled, after the last cycle.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "partita_kube_leader", Help: "1 while this replica holds the leader lease.",
		}),
	}
	reg.MustRegister(m.cycles, m.cycleSeconds, m.engineSeconds, m.binds, m.evictions, m.reconfigs, m.pendingPods, m.leader)
	return m
}
