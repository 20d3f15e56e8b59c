package carbon

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
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeClientPair writes a CA and a client certificate it signed; it returns the CA pool
// and the certificate and key file paths.
func writeClientPair(t *testing.T) (*x509.CertPool, string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clients"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "karmada-scheduler"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, certFile, keyFile
}

func TestClientCertificateIsPresented(t *testing.T) {
	pool, certFile, keyFile := writeClientPair(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "karmada-scheduler" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"clusters":["green"],"filtered":[]}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pemOf(srv), 0o600); err != nil {
		t.Fatal(err)
	}
	request := &Request{Clusters: []ClusterFacts{{Name: "green"}}}

	client, err := NewClient(srv.URL, TLSFiles{CA: ca, Cert: certFile, Key: keyFile}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Filter(context.Background(), request); err != nil || len(resp.Clusters) != 1 {
		t.Fatalf("filter with a client certificate: %v %+v", err, resp)
	}
	without, err := NewClient(srv.URL, TLSFiles{CA: ca}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.Filter(context.Background(), request); err == nil {
		t.Fatal("a server that requires a client certificate must refuse a client without one")
	}
	for _, files := range []TLSFiles{{Cert: certFile}, {Key: keyFile}, {Cert: keyFile, Key: certFile}} {
		if _, err := NewClient(srv.URL, files, time.Second); err == nil {
			t.Fatalf("TLS files %+v must be an error", files)
		}
	}
	if err := (&Options{URL: "https://x", CertFile: certFile, Timeout: time.Second, CacheTTL: time.Second}).Validate(); err == nil {
		t.Fatal("a certificate without its key must be an error")
	}
}
