package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA signs certificates for tests.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA makes a CA valid for a day.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "falcon test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// WriteCA writes the CA's certificate to dir/ca.crt and returns its path.
func (ca *CA) WriteCA(tb testing.TB, dir string) string {
	tb.Helper()
	p := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(p, ca.PEM, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Issue signs a server certificate for names (DNS names or IP addresses)
// and returns its PEM certificate and key.
func (ca *CA) Issue(tb testing.TB, names ...string) (certPEM, keyPEM []byte, serialNumber *big.Int) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), tmpl.SerialNumber
}

// WriteServer issues a certificate for names into dir/tls.crt and
// dir/tls.key and returns both paths and the certificate's serial number.
func (ca *CA) WriteServer(tb testing.TB, dir string, names ...string) (certFile, keyFile string, serialNumber *big.Int) {
	tb.Helper()
	c, k, sn := ca.Issue(tb, names...)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// Written to temporary names and renamed, as a Secret volume swaps its
	// files, so a reader never sees half a pair.
	for _, f := range []struct {
		path string
		data []byte
	}{{certFile, c}, {keyFile, k}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			tb.Fatal(err)
		}
	}
	return certFile, keyFile, sn
}

func serial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
