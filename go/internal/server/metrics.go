package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"partita.dev/partita/internal/standalone"
	"partita.dev/partita/internal/store"
)

// Metrics are the server's Prometheus metrics, on a registry of their own.
// It is the world's Observer (counters and histograms of what happens);
// gauges are read from the world at scrape time.
type Metrics struct {
	reg         *prometheus.Registry
	world       *standalone.World
	submissions *prometheus.CounterVec
	started     *prometheus.CounterVec
	finished    *prometheus.CounterVec
	preemptions *prometheus.CounterVec
	reconfigs   prometheus.Counter
	wait        *prometheus.HistogramVec
	cycle       prometheus.Histogram
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
}

// NewMetrics builds the metrics; pass it to the world as its Observer and
// to New.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.submissions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "partita_jobs_submitted_total", Help: "Jobs accepted, by team."}, []string{"team"})
	m.started = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "partita_jobs_started_total", Help: "Jobs that got all their resources, by team and class."}, []string{"team", "class"})
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "partita_jobs_finished_total", Help: "Jobs finished, by team, class and final state."}, []string{"team", "class", "state"})
	m.preemptions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "partita_preemptions_total", Help: "Preemptions, by the victim's team and class."}, []string{"team", "class"})
	m.reconfigs = prometheus.NewCounter(prometheus.CounterOpts{Name: "partita_mig_reconfigurations_total", Help: "MIG layout changes and instance creations."})
	m.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "partita_job_wait_seconds", Help: "Queue wait before a job got all its resources, in cluster seconds, by team and class.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"team", "class"})
	m.cycle = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "partita_scheduler_cycle_seconds", Help: "Wall time of one scheduling cycle.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "partita_api_requests_total", Help: "API requests by route and status code."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "partita_api_request_seconds", Help: "API request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, []string{"route"})
	m.reg.MustRegister(m.submissions, m.started, m.finished, m.preemptions, m.reconfigs, m.wait, m.cycle, m.requests, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// attach makes the gauges read w.
func (m *Metrics) attach(w *standalone.World) {
	m.world = w
	m.reg.MustRegister(gauges{w})
}

func (m *Metrics) Started(team, class string, wait time.Duration) {
	m.started.WithLabelValues(team, class).Inc()
	m.wait.WithLabelValues(team, class).Observe(wait.Seconds())
}
func (m *Metrics) Finished(team, class, state string) {
	m.finished.WithLabelValues(team, class, state).Inc()
}
func (m *Metrics) Preempted(team, class string) { m.preemptions.WithLabelValues(team, class).Inc() }
func (m *Metrics) Reconfigured()                { m.reconfigs.Inc() }
func (m *Metrics) Cycle(took time.Duration, pending int) {
	m.cycle.Observe(took.Seconds())
}

var _ standalone.Observer = (*Metrics)(nil)

// knowTeams makes every team's counters exist from the start, so that a
// rate over them reads 0 rather than nothing.
func (m *Metrics) knowTeams(teams []store.Team) {
	for _, t := range teams {
		m.submissions.WithLabelValues(t.Name)
		for _, c := range t.Classes {
			m.preemptions.WithLabelValues(t.Name, c)
			m.started.WithLabelValues(t.Name, c)
		}
	}
}

func (m *Metrics) submitted(team string) { m.submissions.WithLabelValues(team).Inc() }

func (m *Metrics) request(route string, code int, took time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(took.Seconds())
}

func (s *Server) serveMetrics(c *call) error {
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(c.w, c.r)
	return nil
}

// gauges reads the world's state at scrape time.
type gauges struct{ w *standalone.World }

var (
	dGPUs        = prometheus.NewDesc("partita_gpus", "GPUs in the cluster.", nil, nil)
	dUtilization = prometheus.NewDesc("partita_gpu_utilization", "Share of the cluster's GPUs allocated (held) and useful (needed by running tasks).", []string{"kind"}, nil)
	dQueue       = prometheus.NewDesc("partita_queue_depth", "Queued jobs by team and class.", []string{"team", "class"}, nil)
	dHeld        = prometheus.NewDesc("partita_team_gpus", "GPUs a team holds (a MIG slice counts its compute share).", []string{"team"}, nil)
	dRunning     = prometheus.NewDesc("partita_jobs_running", "Jobs whose tasks all run.", nil, nil)
)

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dGPUs, dUtilization, dQueue, dHeld, dRunning} {
		ch <- d
	}
}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	st := g.w.Stats()
	ch <- prometheus.MustNewConstMetric(dGPUs, prometheus.GaugeValue, float64(st.GPUs))
	ch <- prometheus.MustNewConstMetric(dUtilization, prometheus.GaugeValue, st.Utilization.Allocated, "allocated")
	ch <- prometheus.MustNewConstMetric(dUtilization, prometheus.GaugeValue, st.Utilization.Useful, "useful")
	ch <- prometheus.MustNewConstMetric(dRunning, prometheus.GaugeValue, float64(st.Utilization.RunningJobs))
	for k, n := range st.Queued {
		ch <- prometheus.MustNewConstMetric(dQueue, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for team, held := range st.Held {
		ch <- prometheus.MustNewConstMetric(dHeld, prometheus.GaugeValue, held, team)
	}
}

var _ http.Handler = promhttp.Handler()
