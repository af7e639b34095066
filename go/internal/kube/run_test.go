package kube

import (
	"context"
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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writePair writes a self-signed serving certificate for 127.0.0.1 with
// the given serial number, as cert-manager would into the mounted Secret.
func writePair(t *testing.T, dir string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// The key first: a handshake between the two writes sees a mismatched
	// pair and keeps the last good one.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The webhook server starts without its certificate (the Secret is
// optional in the Deployment), serves once the files appear, and picks up
// a renewal without a restart.
func TestWebhookServerReloadsItsCertificate(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	addr, err := serve(ctx, "127.0.0.1:0", h, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), errc)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() (int64, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
	}
	if _, err := serial(); err == nil {
		t.Fatal("a handshake succeeded without a certificate")
	}
	select {
	case err := <-errc:
		t.Fatalf("the server stopped without its certificate: %v", err)
	default:
	}
	writePair(t, dir, 1)
	if got, err := serial(); err != nil || got != 1 {
		t.Fatalf("after the certificate appeared: serial %d, %v; want 1", got, err)
	}
	// A renewal: new files in place.
	writePair(t, dir, 2)
	if got, err := serial(); err != nil || got != 2 {
		t.Fatalf("after a renewal: serial %d, %v; want 2", got, err)
	}
	// An unreadable renewal keeps the last good pair.
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := serial(); err != nil || got != 2 {
		t.Fatalf("after a bad renewal: serial %d, %v; want the last good one, 2", got, err)
	}
}
