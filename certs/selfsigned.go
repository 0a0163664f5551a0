package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Bundle is a serving certificate with its key and the CA that signed it, PEM-encoded.
type Bundle struct {
	CAPEM   []byte
	CertPEM []byte
	KeyPEM  []byte
}

// SelfSigned makes a throwaway CA and a serving certificate signed by it for the given DNS
// names and IPs, valid for validity. The CA's key exists only in memory and is dropped on
// return: nothing can be signed with it later, and the bundle cannot be renewed, only
// replaced. For local runs and tests only (flag --self-signed-certs); installed clusters use
// cert-manager.
func SelfSigned(dnsNames []string, ips []net.IP, validity time.Duration) (*Bundle, error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("self-signed certificate: at least one DNS name or IP is needed")
	}
	ca, err := NewCA("sandgate self-signed webhook CA", validity)
	if err != nil {
		return nil, err
	}
	return ca.Issue(dnsNames, ips, validity)
}

// CA is a certificate authority whose key stays in memory for as long as the CA is kept: each
// Issue signs a new serving certificate under the same CA certificate, so that a client
// trusting the CA (the caBundle of a webhook configuration) trusts every one of them, as with
// a cert-manager CA Issuer's renewals. For local runs and tests only.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a CA named commonName, valid for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          mustSerial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// PEM is the CA's certificate, PEM-encoded: what a client that trusts the CA is given.
func (ca *CA) PEM() []byte { return ca.pem }

// Issue signs a new serving certificate for the given DNS names and IPs, valid for validity,
// and returns it with its key and the CA's certificate.
func (ca *CA) Issue(dnsNames []string, ips []net.IP, validity time.Duration) (*Bundle, error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("serving certificate: at least one DNS name or IP is needed")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the serving key: %w", err)
	}
	cn := "sandgate-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: mustSerial(),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the serving key: %w", err)
	}
	return &Bundle{
		CAPEM:   ca.pem,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Write puts the bundle into dir as ca.crt, tls.crt and tls.key. Each file is written to a
// temporary name and renamed into place, so a Watcher never reads half a file.
func (b *Bundle) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{CAFile, b.CAPEM, 0o644},
		{KeyFile, b.KeyPEM, 0o600},
		{CertFile, b.CertPEM, 0o644},
	} {
		tmp, err := os.CreateTemp(dir, "."+f.name+"-*")
		if err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
		_, werr := tmp.Write(f.data)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), f.mode)); err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
		if err := os.Rename(tmp.Name(), filepath.Join(dir, f.name)); err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return nil
}

// mustSerial returns a random 128-bit serial number; the system's random source failing is
// not something a caller can handle.
func mustSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("reading random serial number: %v", err))
	}
	return n
}
