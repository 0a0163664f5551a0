package soak

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/sandgate-dev/sandgate/certs"
)

// certValidity is how long the soak's CA and serving certificates are valid: longer than any
// soak.
const certValidity = 24 * time.Hour

// newWebhookCA is the soak's stand-in for a cert-manager CA Issuer: a CA that keeps its key,
// so the webhook's serving certificate can be renewed under the same CA while the caBundle the
// API server trusts stays as it is, which is what a cert-manager renewal does.
func newWebhookCA() (*certs.CA, error) {
	return certs.NewCA("sandgate soak webhook CA", certValidity)
}

// issueServing signs a new serving certificate of ca for the loopback addresses and returns it
// as the files a cert-manager Secret holds, with its serial number.
func issueServing(ca *certs.CA) (*certs.Bundle, *big.Int, error) {
	bundle, err := ca.Issue([]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, certValidity)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(bundle.CertPEM)
	if block == nil {
		return nil, nil, errors.New("the issued serving certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the issued serving certificate: %w", err)
	}
	return bundle, cert.SerialNumber, nil
}
