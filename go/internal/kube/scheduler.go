package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/kube/api/v1alpha1"
	"partita.dev/partita/internal/random"
)

// MIG reconfiguration modes (Options.MIGReconfigure).
const (
	// MIGIdleNodes changes a node's MIG layout only while no pod holds a
	// GPU there: the GPU Operator's MIG manager stops GPU pods while it
	// applies a layout. The default, and the only safe mode with the
	// stock operator.
	MIGIdleNodes = "idle-nodes"
	// MIGKeepInstances also changes busy nodes, keeping every instance a
	// pod uses: for a MIG agent that changes only the affected GPUs and
	// leaves running pods alone. The stock MIG manager is not one.
	MIGKeepInstances = "keep-instances"
	// MIGOff never changes layouts; pods use the instances there are.
	MIGOff = "off"
)

// Options configure a Scheduler. Zero values take the defaults noted.
type Options struct {
	SchedulerName string // DefaultSchedulerName
	// Preset is the engine configuration: partita (default), gang-drf or
	// naive (sched.Preset).
	Preset string
	// Grace is what an evicted pod gets to checkpoint and exit (30 s).
	Grace time.Duration
	// ReconfigCooldown overrides the preset's least time between two MIG
	// changes of one GPU.
	ReconfigCooldown time.Duration
	// MIGConfigMap is where the mig-parted config lives, the one the GPU
	// Operator's MIG manager reads ("gpu-operator/partita-mig-parted").
	MIGConfigNamespace, MIGConfigName string
	MIGReconfigure                    string // MIGIdleNodes
	// BindWorkers bound the concurrent binds and evictions (32).
	BindWorkers int
	// Interval is the longest time between cycles when nothing changes,
	// for time-based rules (reservations, cooldowns) (2 s).
	Interval time.Duration
	// ToleratedTaints are taint keys Partita ignores on nodes.
	ToleratedTaints []string
	Seed            int64
	Logger          *slog.Logger
	// BeforeBind, when set, runs before each bind; an error skips the
	// bind. Tests inject faults with it.
	BeforeBind func(*corev1.Pod) error
}

func (o *Options) defaults() {
	if o.SchedulerName == "" {
		o.SchedulerName = DefaultSchedulerName
	}
	if o.Preset == "" {
		o.Preset = "partita"
	}
	if o.Grace == 0 {
		o.Grace = 30 * time.Second
	}
	if o.MIGConfigNamespace == "" {
		o.MIGConfigNamespace = "gpu-operator"
	}
	if o.MIGConfigName == "" {
		o.MIGConfigName = "partita-mig-parted"
	}
	if o.MIGReconfigure == "" {
		o.MIGReconfigure = MIGIdleNodes
	}
	if o.BindWorkers <= 0 {
		o.BindWorkers = 32
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Scheduler is the Kubernetes world: informers in, API calls out, the
// engine's cycle in between. Run drives it.
type Scheduler struct {
	opt     Options
	client  kubernetes.Interface
	dyn     dynamic.Interface
	engine  *sched.Scheduler
	metrics *Metrics

	factory    informers.SharedInformerFactory
	cmFactory  informers.SharedInformerFactory
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	pods       corelisters.PodLister
	nodes      corelisters.NodeLister
	configMaps corelisters.ConfigMapLister
	queues     cache.GenericLister
	podGroups  cache.GenericLister
	synced     []cache.InformerSynced

	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster

	kick chan struct{}

	// Memory between cycles; only the cycle goroutine touches it.
	assumed  map[types.UID]assumedBind
	evicting map[types.UID]time.Time
	changes  map[string]*migChange // node -> MIG change in flight
	waitFor  map[string]string     // job -> node whose MIG change it waits for
	reasons  map[types.UID]string  // last wait reason reported per pod
	// noGroup holds the gangs (namespace/name) whose PodGroup the API
	// server did not have when asked (confirmPodGroups).
	noGroup  map[string]bool
	placed   map[types.UID]*cluster.Assignment
	statuses statusCache

	mu    sync.Mutex
	ready bool
}

type assumedBind struct {
	Assumed
	at time.Time
}

// assumeTTL is how long a bind, eviction or label change is taken as done
// without the informer showing it; past it the informer's view wins.
const assumeTTL = 30 * time.Second

// New builds a Scheduler; Run starts it.
func New(client kubernetes.Interface, dyn dynamic.Interface, opt Options, m *Metrics) (*Scheduler, error) {
	opt.defaults()
	switch opt.MIGReconfigure {
	case MIGIdleNodes, MIGKeepInstances, MIGOff:
	default:
		return nil, fmt.Errorf("MIG reconfigure mode %q: want %s, %s or %s", opt.MIGReconfigure, MIGIdleNodes, MIGKeepInstances, MIGOff)
	}
	cfg, err := engineConfig(opt)
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	s := &Scheduler{
		opt: opt, client: client, dyn: dyn, metrics: m,
		engine:  sched.New(cfg, random.New(opt.Seed)),
		kick:    make(chan struct{}, 1),
		assumed: map[types.UID]assumedBind{}, evicting: map[types.UID]time.Time{}, noGroup: map[string]bool{},
		changes: map[string]*migChange{}, waitFor: map[string]string{}, reasons: map[types.UID]string{},
	}
	s.factory = informers.NewSharedInformerFactory(client, 0)
	s.cmFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(opt.MIGConfigNamespace))
	s.dynFactory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	podInf := s.factory.Core().V1().Pods()
	nodeInf := s.factory.Core().V1().Nodes()
	cmInf := s.cmFactory.Core().V1().ConfigMaps()
	qInf := s.dynFactory.ForResource(v1alpha1.QueuesGVR)
	pgInf := s.dynFactory.ForResource(v1alpha1.PodGroupsGVR)
	s.pods, s.nodes, s.configMaps = podInf.Lister(), nodeInf.Lister(), cmInf.Lister()
	s.queues, s.podGroups = qInf.Lister(), pgInf.Lister()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.wake() },
		UpdateFunc: func(any, any) { s.wake() },
		DeleteFunc: func(any) { s.wake() },
	}
	for _, inf := range []cache.SharedIndexInformer{podInf.Informer(), nodeInf.Informer(), cmInf.Informer(), qInf.Informer(), pgInf.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
		s.synced = append(s.synced, inf.HasSynced)
	}
	s.broadcaster = record.NewBroadcaster()
	s.recorder = s.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: opt.SchedulerName})
	return s, nil
}

// engineConfig builds the engine's configuration: the preset with its
// placement policy (Partita's own for partita, stock Kubernetes placement
// for the others, as in the simulator), plus a filter that keeps new work
// off nodes Kubernetes says take none.
func engineConfig(opt Options) (sched.Config, error) {
	placement := "k8s-default"
	if opt.Preset == "partita" {
		placement = "partita"
	}
	// The expected workload is not known in advance on Kubernetes: take
	// one-GPU tasks, the neutral choice (the simulator's default too).
	shapes := []frag.Shape{{Milli: 1000, Num: 1}}
	pc := policies.Config{Typical: frag.Typicals(shapes, frag.DefaultThreshold, nil), Shapes: shapes, NormCPU: 1, NormGPU: 1}
	pol, err := policies.New(placement, pc)
	if err != nil {
		return sched.Config{}, err
	}
	pol.Filters = append([]engine.Filter{nodeFilter{}}, pol.Filters...)
	cfg, err := sched.Preset(opt.Preset, pol)
	if err != nil {
		return sched.Config{}, err
	}
	cfg.Grace = opt.Grace
	// Moving running replicas (a second pod, then deleting the first) is
	// not carried out by this scheduler yet.
	cfg.Migrate = false
	if opt.ReconfigCooldown > 0 {
		cfg.ReconfigCooldown = opt.ReconfigCooldown
	}
	if opt.MIGReconfigure == MIGOff {
		cfg.MIG = false
	}
	return cfg, nil
}

// nodeFilter rules out nodes that take no new pods (not Ready, cordoned,
// an untolerated taint), whatever the pod asks.
type nodeFilter struct{}

var _ engine.Filter = nodeFilter{}

func (nodeFilter) Name() string { return "kubernetes-node" }

func (nodeFilter) Filter(n *cluster.Node, _ *engine.Request) (bool, engine.Reason) {
	if n.Labels[labelUnschedulable] != "" {
		return false, engine.Reason{Filter: "kubernetes-node", Code: engine.CodePolicy}
	}
	return true, engine.Reason{}
}

func (s *Scheduler) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Ready reports whether the informers have synced.
func (s *Scheduler) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// Start starts the informers and waits for them to sync. Followers call
// it too, so the webhook can read nodes and a new leader starts warm.
func (s *Scheduler) Start(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	s.cmFactory.Start(ctx.Done())
	s.dynFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return errors.New("informers did not sync")
	}
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	return nil
}

// Nodes lists the nodes the informer holds (for the webhook).
func (s *Scheduler) Nodes() ([]*corev1.Node, error) { return s.nodes.List(labels.Everything()) }

// Run schedules until ctx ends. Start must have returned first.
func (s *Scheduler) Run(ctx context.Context) error {
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.client.CoreV1().Events("")})
	defer s.broadcaster.Shutdown()
	if err := s.ensureConfigMap(ctx); err != nil {
		// Not fatal: binds and evictions work without it, and each MIG
		// change tries again.
		s.opt.Logger.Warn("MIG config map not ready; MIG changes will retry", "err", err)
	}
	go s.statusLoop(ctx)
	tick := time.NewTicker(s.opt.Interval)
	defer tick.Stop()
	for {
		if err := s.cycle(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.opt.Logger.Error("cycle failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-tick.C:
		}
	}
}
