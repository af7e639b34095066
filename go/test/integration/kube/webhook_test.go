package kube_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"partita.dev/partita/internal/kube"
	"partita.dev/partita/test/integration/kubetest"
)

// TestWebhookSetsTheDeviceRequest: with the admission webhook installed
// (the MutatingWebhookConfiguration of deploy/kubernetes/webhook.yaml,
// pointed at a TLS server in this process), a pod that states only its
// GPU memory is created with nvidia.com/mig-<profile>: 1 in its spec, as
// the device plugin needs, and is bound to an instance of that profile.
func TestWebhookSetsTheDeviceRequest(t *testing.T) {
	e := newEnv(t)
	e.createNode(kubetest.NewMIGNode("mig-0", 0, map[string]int{"1g.10gb": 3, "1g.20gb": 2}, map[string]string{kubetest.LabelGPUCount: "1"}))
	e.kubelet()

	wh := &kube.Webhook{SchedulerName: "partita", Headroom: 0.1, Nodes: func() ([]*corev1.Node, error) {
		list, err := e.client.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := make([]*corev1.Node, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}}
	mux := http.NewServeMux()
	mux.Handle(kube.WebhookPath, wh)
	srv := httptest.NewUnstartedServer(mux)
	caPEM, cert := selfSignedServing(t)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	// The shipped configuration, with its rules and match conditions,
	// reached by URL instead of through the Service.
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	for _, u := range manifests(t, "webhook.yaml") {
		if u.GetKind() == "MutatingWebhookConfiguration" {
			if err := fromUnstructured(u, &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(cfg.Webhooks) != 1 {
		t.Fatalf("webhook.yaml: %d webhooks, want 1", len(cfg.Webhooks))
	}
	url := srv.URL + kube.WebhookPath
	cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	cfg.Annotations = nil
	if _, err := e.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(e.ctx, &cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server picks the configuration up within a moment.
	e.eventually(30*time.Second, "webhook active", func() (bool, error) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Annotations: map[string]string{kube.AnnotationGPUMemory: "5Gi"}},
			Spec:       corev1.PodSpec{SchedulerName: "partita", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		}
		got, err := e.client.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		_, ok := got.Spec.Containers[0].Resources.Limits["nvidia.com/mig-1g.10gb"]
		return ok, nil
	})

	e.startScheduler(testOptions())
	// 15 GiB + 10% needs the 20 GiB of a 1g.20gb.
	e.createPod(podSpec{name: "embed", ann: map[string]string{kube.AnnotationGPUMemory: "15Gi", kube.AnnotationGPUCompute: "0.1"}})
	p := e.pod("embed")
	if q := p.Spec.Containers[0].Resources.Limits["nvidia.com/mig-1g.20gb"]; q.Value() != 1 {
		t.Fatalf("limits %v, want nvidia.com/mig-1g.20gb: 1", p.Spec.Containers[0].Resources.Limits)
	}
	if p.Annotations[kube.AnnotationMIGProfile] != "1g.20gb" {
		t.Errorf("annotation %s=%q", kube.AnnotationMIGProfile, p.Annotations[kube.AnnotationMIGProfile])
	}
	p = e.waitBound("embed")["embed"]
	if s := p.Annotations[kube.AnnotationMIGSlice]; len(s) < 10 || s[:10] != "0:1g.20gb@" {
		t.Fatalf("bound with %s=%q, want a 1g.20gb instance", kube.AnnotationMIGSlice, s)
	}
	// Pods of other schedulers are not sent to the webhook at all.
	other := e.createPod(podSpec{name: "other", scheduler: "default-scheduler", ann: map[string]string{kube.AnnotationGPUMemory: "15Gi"}})
	if len(other.Spec.Containers[0].Resources.Limits) != 0 {
		t.Fatalf("another scheduler's pod was changed: %v", other.Spec.Containers[0].Resources.Limits)
	}
}

// selfSignedServing makes a CA and a serving certificate for 127.0.0.1.
func selfSignedServing(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "partita-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	cert, err := tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert
}
