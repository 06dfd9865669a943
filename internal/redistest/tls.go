package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a server started by StartTLS, in a directory of their own: a
// certificate authority made for the test, the server's certificate (for 127.0.0.1 and
// localhost) and a client certificate, each signed by it.
type TLSFiles struct {
	CA                    string // the authority's certificate, for a client to trust
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// StartTLS runs a redis-server that speaks TLS only: on a free 127.0.0.1 port with
// --tls-port, and --port 0 so that nothing listens in the clear. The rig makes its
// certificates (TLSFiles) in a temporary directory of the test's. The server asks clients for a
// certificate signed by the test's authority and refuses one signed by another, but lets a
// client without one in (--tls-auth-clients optional), so that a client configured as a
// service usually is, trusting the server alone, connects too. args are extra server
// arguments, as for Start; "--tls-auth-clients", "yes" makes a client certificate required.
// Options and Client of the server connect over TLS, with the client certificate. StartTLS
// fails the test as Start does, and if the certificates can't be made.
func StartTLS(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s := newServer(tb, serverBinary(tb), false, nil)
	// Not in the server's directory, which Restart empties.
	files, err := makeCerts(tb.TempDir())
	if err != nil {
		tb.Fatalf("redistest: StartTLS: %v", err)
	}
	if s.tls, err = clientTLS(files); err != nil {
		tb.Fatalf("redistest: StartTLS: %v", err)
	}
	s.tlsFiles = files
	s.args = append(s.args,
		"--tls-cert-file", files.ServerCert,
		"--tls-key-file", files.ServerKey,
		"--tls-ca-cert-file", files.CA,
		"--tls-auth-clients", "optional",
	)
	s.args = append(s.args, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.start(true); err != nil {
		// A server built without TLS (make BUILD_TLS=no, as the other
		// versions of the version matrix are) can't run these tests; the
		// skip says so, and Debian's package, which CI runs, has TLS.
		if log := s.logTail(); strings.Contains(log, "Failed finding TLS support") ||
			strings.Contains(log, ">>> 'tls-") && strings.Contains(log, "Bad directive") {
			tb.Skipf("redistest: %s was built without TLS, so this test of TLS can't run on it", s.bin)
		}
		tb.Fatalf("%v", err)
	}
	return s
}

// TLS returns the files of a server started by StartTLS, and false for one started by Start.
func (s *Server) TLS() (TLSFiles, bool) {
	return s.tlsFiles, s.tls != nil
}

// TLSConfig returns a new client configuration for a server started by StartTLS: it trusts
// the test's authority and presents the client certificate. It returns nil for a server
// started by Start.
func (s *Server) TLSConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Clone()
}

// clientTLS is the client configuration for files.
func clientTLS(files TLSFiles) (*tls.Config, error) {
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", files.CA)
	}
	pair, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// makeCerts makes a certificate authority, and a server and a client certificate it signs,
// valid from an hour ago for a day, and writes them to dir as PEM files.
func makeCerts(dir string) (TLSFiles, error) {
	files := TLSFiles{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return files, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest authority"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return files, err
	}
	if err := writePEM(files.CA, "CERTIFICATE", caDER); err != nil {
		return files, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return files, err
	}
	for i, leaf := range []struct {
		cert, key string
		tmpl      x509.Certificate
	}{
		{files.ServerCert, files.ServerKey, x509.Certificate{
			Subject:     pkix.Name{CommonName: "localhost"},
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{files.ClientCert, files.ClientKey, x509.Certificate{
			Subject:     pkix.Name{CommonName: "redistest client"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return files, err
		}
		tmpl := leaf.tmpl
		tmpl.SerialNumber = big.NewInt(int64(i + 2))
		tmpl.NotBefore, tmpl.NotAfter = ca.NotBefore, ca.NotAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return files, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return files, err
		}
		if err := writePEM(leaf.cert, "CERTIFICATE", der); err != nil {
			return files, err
		}
		if err := writePEM(leaf.key, "PRIVATE KEY", keyDER); err != nil {
			return files, err
		}
	}
	return files, nil
}

func writePEM(name, kind string, der []byte) error {
	return os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
