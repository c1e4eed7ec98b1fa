package kubeenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is one cluster's key material, written under dir/pki. ECDSA P-256
// keys are used throughout because they are generated in microseconds, where
// RSA would add a noticeable share of a cluster's start time.
type pki struct {
	CACert, CAKey           string // self-signed cluster CA
	ServingCert, ServingKey string // kube-apiserver's serving certificate
	SAKey, SAPub            string // service-account token signing key pair
	TokenFile               string // --token-auth-file: the admin's bearer token
	AdminToken              string

	caPEM  []byte
	ca     *x509.Certificate
	caPriv *ecdsa.PrivateKey
	dir    string
}

// The admin (bearer token) and the components (client certificates) are all
// in system:masters: the harness runs a control plane for Falcon, it does not
// test RBAC bootstrap. A test needing a restricted identity makes a service
// account and a token for it, as in a real cluster.
const (
	adminUser    = "falcon-admin"
	mastersGroup = "system:masters"
)

const (
	serviceCIDR   = "10.96.0.0/16"
	serviceIP     = "10.96.0.1" // the kubernetes service's address in serviceCIDR
	clusterDomain = "cluster.local"
	saTokenIssuer = "https://kubernetes.default.svc." + clusterDomain
	certValidity  = 7 * 24 * time.Hour
	certClockSkew = time.Hour
)

func newPKI(dir string) (*pki, error) {
	dir = filepath.Join(dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kubeenv-ca"},
		NotBefore:             now.Add(-certClockSkew),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.caPriv = caKey
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if p.CACert, err = p.write("ca.crt", p.caPEM); err != nil {
		return nil, err
	}
	if p.CAKey, err = p.writeKey("ca.key", caKey); err != nil {
		return nil, err
	}

	// The apiserver is reached as 127.0.0.1 from the host and, by pods that
	// would run in a real cluster, through the kubernetes service names.
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + clusterDomain},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(serviceIP)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if p.ServingCert, p.ServingKey, err = p.issue("apiserver", serving); err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if p.SAKey, err = p.writeKey("sa.key", saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if p.SAPub, err = p.write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})); err != nil {
		return nil, err
	}

	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	p.AdminToken = hex.EncodeToString(tok)
	line := fmt.Sprintf("%s,%s,%s,%q\n", p.AdminToken, adminUser, adminUser, mastersGroup)
	if p.TokenFile, err = p.write("tokens.csv", []byte(line)); err != nil {
		return nil, err
	}
	return p, nil
}

// clientCert issues a client certificate for user in groups and returns the
// PEM-encoded certificate and key.
func (p *pki) clientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	key, der, err := p.sign(tmpl)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// issue signs tmpl with the CA and writes name.crt and name.key.
func (p *pki) issue(name string, tmpl *x509.Certificate) (certPath, keyPath string, err error) {
	key, der, err := p.sign(tmpl)
	if err != nil {
		return "", "", err
	}
	if certPath, err = p.write(name+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return "", "", err
	}
	if keyPath, err = p.writeKey(name+".key", key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func (p *pki) sign(tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-certClockSkew)
	tmpl.NotAfter = now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caPriv)
	return key, der, err
}

func (p *pki) writeKey(name string, key *ecdsa.PrivateKey) (string, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	return p.write(name, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func (p *pki) write(name string, data []byte) (string, error) {
	path := filepath.Join(p.dir, name)
	return path, os.WriteFile(path, data, 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
