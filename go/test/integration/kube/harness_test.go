// Package kube_test runs Partita's Kubernetes scheduler against a real
// kube-apiserver (and etcd) started in the test process. The tests play
// the components a cluster would add: the kubelet (pods run, evicted pods
// go away) and the GPU Operator's MIG manager (it applies the layout the
// label names and the device plugin advertises it).
package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"partita.dev/partita/internal/kube"
	"partita.dev/partita/internal/kube/api/v1alpha1"
	"partita.dev/partita/test/integration/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// repoFile is a path in the repository, from this package's directory.
func repoFile(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "..", ".."}, parts...)...)
}

// env is one test's cluster: an API server, clients, and the CRDs from
// deploy/kubernetes/crds.yaml installed.
type env struct {
	t      testing.TB
	ctx    context.Context
	cfg    *rest.Config
	client kubernetes.Interface
	dyn    dynamic.Interface
}

func newEnv(t testing.TB, flags ...string) *env {
	t.Helper()
	cfg := kubetest.Start(t, flags...)
	cfg.QPS, cfg.Burst = 5000, 10000
	e := &env{t: t, ctx: t.Context(), cfg: cfg, client: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
	e.applyCRDs()
	return e
}

// manifests reads the YAML documents of a file under deploy/kubernetes.
func manifests(t testing.TB, name string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(repoFile("deploy", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

func (e *env) applyCRDs() {
	ext := apiextensionsclient.NewForConfigOrDie(e.cfg)
	for _, u := range manifests(e.t, "crds.yaml") {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := fromUnstructured(u, &crd); err != nil {
			e.t.Fatal(err)
		}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, &crd, metav1.CreateOptions{}); err != nil {
			e.t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		e.eventually(30*time.Second, "CRD "+crd.Name+" established", func() (bool, error) {
			c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
	}
	// Discovery of a just-established CRD can lag; wait until both serve.
	for _, gvr := range []struct{ res, ns string }{{"queues", ""}, {"podgroups", "default"}} {
		e.eventually(30*time.Second, gvr.res+" served", func() (bool, error) {
			_, err := e.dyn.Resource(v1alpha1.GroupVersion.WithResource(gvr.res)).Namespace(gvr.ns).List(e.ctx, metav1.ListOptions{})
			return err == nil, nil
		})
	}
}

// create creates an object of any kind the server serves, finding its
// resource through discovery; errNotServed when it serves no such kind.
func (e *env) create(mapper meta.RESTMapper, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", gvk, errNotServed, err)
	}
	r := e.dyn.Resource(m.Resource)
	if ns := u.GetNamespace(); ns != "" {
		_, err = r.Namespace(ns).Create(e.ctx, u, metav1.CreateOptions{})
	} else {
		_, err = r.Create(e.ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return nil
}

var errNotServed = errors.New("kind not served")

// discoveryMapper maps kinds to resources as the server serves them.
func (e *env) discoveryMapper() meta.RESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(e.cfg)))
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtimeConverter.FromUnstructured(u.Object, into)
}

// eventually polls cond until it holds.
func (e *env) eventually(timeout time.Duration, what string, cond func() (bool, error)) {
	e.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
	}
}

// scheduler is a running Partita scheduler.
type scheduler struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *scheduler) stop() {
	s.cancel()
	<-s.done
}

// testOptions are quick defaults: a short interval and cooldown, so tests
// do not wait on time-based rules.
func testOptions() kube.Options {
	return kube.Options{Interval: 100 * time.Millisecond, ReconfigCooldown: time.Second, Grace: time.Second}
}

// startScheduler runs a scheduler until the test ends (or stop). Without
// a logger of the test's own, the scheduler's last log lines (debug
// level: each job's reason to wait) are printed if the test fails.
func (e *env) startScheduler(opt kube.Options) *scheduler {
	e.t.Helper()
	if opt.Logger == nil {
		tail := &logTail{}
		opt.Logger = slog.New(slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelDebug}))
		e.t.Cleanup(func() {
			if e.t.Failed() {
				e.t.Logf("the scheduler's last log lines:\n%s", tail.String())
			}
		})
	}
	if os.Getenv("PARTITA_TEST_LOG") != "" {
		opt.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := kube.New(kubernetes.NewForConfigOrDie(kube.ClientConfig(e.cfg)), e.dyn, opt, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	if err := s.Start(ctx); err != nil {
		cancel()
		e.t.Fatal(err)
	}
	h := &scheduler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := s.Run(ctx); err != nil {
			e.t.Errorf("scheduler: %v", err)
		}
	}()
	e.t.Cleanup(h.stop)
	return h
}

// createNode creates a node with its status (accepted on create), and
// plays the node lifecycle controller: the API server taints a new node
// node.kubernetes.io/not-ready, and the controller lifts the taint once
// the node reports Ready.
func (e *env) createNode(n *corev1.Node) {
	e.t.Helper()
	if err := createReadyNode(e.ctx, e.client, n); err != nil {
		e.t.Fatal(err)
	}
}

func createReadyNode(ctx context.Context, c kubernetes.Interface, n *corev1.Node) error {
	got, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	var keep []corev1.Taint
	for _, t := range got.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(got.Spec.Taints) {
		return nil
	}
	got.Spec.Taints = keep
	_, err = c.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// podSpec is a pod for Partita in namespace default.
type podSpec struct {
	name, group, queue, priorityClass string
	gpus                              int64
	mig                               string
	ann                               map[string]string
	labels                            map[string]string
	scheduler                         string
}

func (e *env) createPod(s podSpec) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: "default", Labels: map[string]string{}, Annotations: s.ann},
		Spec: corev1.PodSpec{
			SchedulerName:     "partita",
			PriorityClassName: s.priorityClass,
			Containers: []corev1.Container{{
				Name: "main", Image: "example.invalid/work",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{},
				},
			}},
		},
	}
	if s.scheduler != "" {
		p.Spec.SchedulerName = s.scheduler
	}
	for k, v := range s.labels {
		p.Labels[k] = v
	}
	if s.group != "" {
		p.Labels[kube.LabelPodGroup] = s.group
	}
	if s.queue != "" {
		p.Labels[kube.LabelQueue] = s.queue
	}
	if s.gpus > 0 {
		p.Spec.Containers[0].Resources.Limits[kubetest.ResourceGPU] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
	}
	if s.mig != "" {
		p.Spec.Containers[0].Resources.Limits[kubetest.MIGResource(s.mig)] = resource.MustParse("1")
	}
	out, err := e.client.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create pod %s: %v", s.name, err)
	}
	return out
}

func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitBound waits until the pods are bound and returns them.
func (e *env) waitBound(names ...string) map[string]*corev1.Pod {
	e.t.Helper()
	out := map[string]*corev1.Pod{}
	e.eventually(30*time.Second, fmt.Sprintf("pods %v bound", names), func() (bool, error) {
		for _, n := range names {
			p, err := e.client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName == "" {
				return false, nil
			}
			out[n] = p
		}
		return true, nil
	})
	return out
}

// stayPending checks that the pods are still not bound after a while
// (several scheduling cycles).
func (e *env) stayPending(d time.Duration, names ...string) {
	e.t.Helper()
	time.Sleep(d)
	for _, n := range names {
		if p := e.pod(n); p.Spec.NodeName != "" {
			e.t.Fatalf("pod %s was bound to %s; want it pending", n, p.Spec.NodeName)
		}
	}
}

// waitEvent waits for an Event on the pod whose reason and message match.
func (e *env) waitEvent(pod, reason, contains string) *corev1.Event {
	e.t.Helper()
	var found *corev1.Event
	e.eventually(30*time.Second, fmt.Sprintf("event %s on %s containing %q", reason, pod, contains), func() (bool, error) {
		evs, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		for i, ev := range evs.Items {
			if ev.Reason == reason && strings.Contains(ev.Message, contains) {
				found = &evs.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// fakeKubelet plays every node's kubelet: a bound pod starts running; a
// pod being deleted (evicted) goes away at once, as if it exited within
// its grace period. It remembers which pods went through the Eviction API.
type fakeKubelet struct {
	mu      sync.Mutex
	evicted map[string]bool
}

func (k *fakeKubelet) wasEvicted(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.evicted[name]
}

func (e *env) kubelet() *fakeKubelet {
	k := &fakeKubelet{evicted: map[string]bool{}}
	e.every(func(ctx context.Context) {
		pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			switch {
			case p.DeletionTimestamp != nil:
				if evictedByAPI(p) {
					k.mu.Lock()
					k.evicted[p.Name] = true
					k.mu.Unlock()
				}
				_ = e.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, *metav1.NewDeleteOptions(0))
			case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending:
				now := metav1.Now()
				p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &now
				_, _ = e.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	})
	return k
}

// every runs f every 50 ms in the background until the test ends (the
// fake kubelet and MIG manager poll as their real counterparts watch).
func (e *env) every(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			f(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func (e *env) createQueue(name string, guaranteed, burst int64, extra map[string]any) error {
	spec := map[string]any{"team": name, "guaranteedGPUs": guaranteed, "burstGPUs": burst}
	for k, v := range extra {
		spec[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "partita.dev/v1alpha1", "kind": "Queue",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	_, err := e.dyn.Resource(v1alpha1.QueuesGVR).Create(e.ctx, u, metav1.CreateOptions{})
	return err
}

func (e *env) createPodGroup(name string, minMember int64, queue string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "partita.dev/v1alpha1", "kind": "PodGroup",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"minMember": minMember, "queue": queue},
	}}
	_, err := e.dyn.Resource(v1alpha1.PodGroupsGVR).Namespace("default").Create(e.ctx, u, metav1.CreateOptions{})
	return err
}

// evictedByAPI reports whether a pod was removed through the Eviction
// API: the API server marks it with the DisruptionTarget condition.
func evictedByAPI(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// logTail keeps the last lines written to it.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

const logTailLines = 300

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	if len(l.lines) > 2*logTailLines {
		l.lines = append(l.lines[:0], l.lines[len(l.lines)-logTailLines:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-logTailLines):], "\n")
}
