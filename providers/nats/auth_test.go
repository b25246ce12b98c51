package nats

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/redact"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// TestAuth: a server that wants a user and password, or a token, serves a
// client that gives them, and refuses one that does not with an error that
// says why and never shows the secret.
func TestAuth(t *testing.T) {
	t.Parallel()
	const password, token = "nats-pass-1", "nats-token-2"
	for _, c := range []struct {
		name       string
		serverArgs []string
		good, bad  Settings
	}{
		{"user and password", []string{"--user", "electd", "--pass", password},
			Settings{User: "electd", Password: password}, Settings{User: "electd", Password: "wrong-" + password}},
		{"token", []string{"--auth", token},
			Settings{Token: token}, Settings{Token: "wrong-" + token}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, _ := teststore.StartNATS(t, c.serverArgs...)
			for _, s := range []*Settings{&c.good, &c.bad} {
				s.Servers, s.Bucket = []string{"nats://" + addr}, "electd"
			}
			good := open(t, c.good)
			l := mustAcquire(t, good, "job", "a", time.Minute)
			if err := good.Release(ctxT(t, 5*time.Second), l); err != nil {
				t.Fatal(err)
			}
			bad := open(t, c.bad)
			_, err := bad.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
			if err == nil || errors.Is(err, providers.ErrHeld) {
				t.Fatalf("Acquire with wrong credentials: %v", err)
			}
			// The connection's error arrives on its own goroutine.
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(strings.ToLower(err.Error()), "authorization") && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				_, err = bad.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
			}
			if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Errorf("Acquire with wrong credentials: %v, want it to say authorization failed", err)
			}
			for _, secret := range c.bad.Secrets() {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
			t.Log(err)
		})
	}
}

// TestTLS: tls:// servers and tls_ca_file reach a server whose certificate
// only that CA signed; tls_cert_file and tls_key_file pass a server that
// verifies clients; without the CA the server's certificate is refused.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := newCA(t, dir)
	serverCert, serverKey := newCert(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := newCert(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)
	caFile := filepath.Join(dir, "ca.pem")

	addr, _ := teststore.StartNATS(t, "--tls", "--tlscert", serverCert, "--tlskey", serverKey, "--tlscacert", caFile, "--tlsverify")
	ok := open(t, Settings{Servers: []string{"tls://" + addr}, Bucket: "electd", TLSCAFile: caFile, TLSCertFile: clientCert, TLSKeyFile: clientKey})
	l := mustAcquire(t, ok, "job", "a", time.Minute)
	if o, err := ok.Observe(ctxT(t, 5*time.Second), "job"); err != nil || o.Token != l.Token {
		t.Fatalf("Observe over TLS: %+v, %v", o, err)
	}

	for name, c := range map[string]struct {
		s    Settings
		want string
	}{
		// TLS 1.3: the server's refusal of the missing certificate may
		// arrive as an alert or as a closed connection after the handshake.
		"no client certificate": {Settings{TLSCAFile: caFile}, "tls"},
		"system CA roots":       {Settings{TLS: true, TLSCertFile: clientCert, TLSKeyFile: clientKey}, "certificate signed by unknown authority"},
	} {
		c.s.Servers, c.s.Bucket = []string{"nats://" + addr}, "electd"
		p := open(t, c.s)
		// The connection's error arrives on its own goroutine.
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			_, err = p.Acquire(ctxT(t, 5*time.Second), providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute})
			if err == nil || strings.Contains(err.Error(), c.want) {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Acquire: %v, want a connection error saying %q", name, err, c.want)
		}
		t.Logf("%s: %v", name, err)
	}

	if _, err := New(t.Context(), Settings{Servers: []string{"tls://" + addr}, TLSCAFile: filepath.Join(dir, "none.pem"), Bucket: "electd"}, nil); err == nil || !strings.Contains(err.Error(), "tls_ca_file") {
		t.Errorf("New with a missing CA file: %v", err)
	}
}

func newCA(t *testing.T, dir string) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "electd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func newCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A credentials file that cannot be read is reported by New, naming the
// attribute; its contents are never read into an error.
func TestCredentialsFile(t *testing.T) {
	_, err := New(t.Context(), Settings{Servers: []string{"nats://127.0.0.1:4222"}, Bucket: "electd", CredentialsFile: filepath.Join(t.TempDir(), "none.creds")}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "nats: credentials_file: ") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("New with a missing credentials file: %v", err)
	}
}

// Secrets cover the password and token, and a password someone wrote into a
// server URL (which Validate refuses).
func TestSecrets(t *testing.T) {
	s := Settings{Servers: []string{"nats://electd:url-pass-3@10.0.0.1:4222"}, User: "electd", Password: "nats-pass-1", Token: "nats-token-2"}
	masked := redact.New(s.Secrets()...).String("nats-pass-1 nats-token-2 url-pass-3 electd")
	for _, secret := range []string{"nats-pass-1", "nats-token-2", "url-pass-3"} {
		if strings.Contains(masked, secret) {
			t.Errorf("masked text still holds %q: %s", secret, masked)
		}
	}
	if !strings.Contains(masked, "electd") {
		t.Errorf("the user name was masked: %s", masked)
	}
}
