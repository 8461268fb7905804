package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// certReloader serves `weft serve --tls-cert --tls-key`: the key pair is
// read at start, where a bad pair fails the start, and read again at a
// handshake when either file changed (its modification time, size or
// inode), so a rotated certificate is served without a restart. A pair
// that does not load after a change is logged once and the last good one
// is served until the files change again. Its methods are safe for
// concurrent use.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu   sync.Mutex
	cert *tls.Certificate // the last good pair; never nil
	seen [2]fileStamp     // the files' stamps when last read, good or bad
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// stampOf returns path's stamp; a file that cannot be stat'ed has the
// zero stamp.
func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// newCertReloader loads the key pair in certFile and keyFile. An empty,
// unreadable or mismatched pair is an error that names the files.
func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	r.seen = [2]fileStamp{stampOf(certFile), stampOf(keyFile)}
	cert, err := loadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert = cert
	r.warnExpiry(cert)
	return r, nil
}

// loadKeyPair reads a certificate chain and its private key, PEM, and
// checks that they belong together.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	for _, f := range []string{certFile, keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("TLS key pair: %w", err)
		}
		if fi.Size() == 0 {
			return nil, fmt.Errorf("TLS key pair: %s is empty", f)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS key pair %s, %s: %w", certFile, keyFile, err)
	}
	return &cert, nil
}

// warnExpiry logs a certificate that is not valid now: clients will
// refuse it, but serving it lets the operator see why.
func (r *certReloader) warnExpiry(cert *tls.Certificate) {
	if cert.Leaf == nil {
		return
	}
	if now := time.Now(); now.After(cert.Leaf.NotAfter) || now.Before(cert.Leaf.NotBefore) {
		r.log.Warn("the TLS certificate is not valid now: clients will refuse it", "cert", r.certFile,
			"notBefore", cert.Leaf.NotBefore, "notAfter", cert.Leaf.NotAfter)
	}
}

// GetCertificate returns the current key pair, read again first when the
// files changed; it is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	now := [2]fileStamp{stampOf(r.certFile), stampOf(r.keyFile)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now == r.seen {
		return r.cert, nil
	}
	r.seen = now
	cert, err := loadKeyPair(r.certFile, r.keyFile)
	if err != nil {
		// A rotation caught between its two files lands here too: the
		// second file's change reads the pair again.
		r.log.Error("the TLS key pair changed and does not load: still serving the last good one", "err", err)
		return r.cert, nil
	}
	r.cert = cert
	r.log.Info("TLS key pair reloaded", "cert", r.certFile)
	r.warnExpiry(cert)
	return r.cert, nil
}

// serverTLSConfig is the TLS configuration of `weft serve`: HTTP/1.1
// (WebSocket upgrades), TLS 1.2 or later, the key pair from r.
func serverTLSConfig(r *certReloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: r.GetCertificate,
	}
}

// tlsClientConfig returns the TLS configuration of this command's
// connections to hosts (client commands, and `weft serve` forwarding to
// other hosts): the CA of --tls-ca (WEFT_TLS_CA) when set, else the
// system's roots. It is read once.
func (a *app) tlsClientConfig() (*tls.Config, error) {
	a.tlsOnce.Do(func() {
		if a.tlsCA == "" {
			return
		}
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			a.tlsErr = fmt.Errorf("--tls-ca: %w", err)
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			a.tlsErr = fmt.Errorf("--tls-ca %s: no PEM certificate in it", a.tlsCA)
			return
		}
		a.tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	})
	return a.tlsConf, a.tlsErr
}

// tlsDialError explains a connection to addr that failed on the host's
// certificate, with what to do; nil when err is not about a certificate.
func tlsDialError(addr string, err error) error {
	if err == nil {
		return nil
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the host at %s presents a certificate signed by an authority this client does not trust: pass the CA's certificate with --tls-ca FILE or WEFT_TLS_CA (%v)", addr, innermost(err))
	case errors.As(err, &hostname):
		return fmt.Errorf("the host at %s presents a certificate for another name: dial it by a name the certificate holds (%v)", addr, innermost(err))
	case errors.As(err, &invalid):
		return fmt.Errorf("the host at %s presents a certificate that is not valid (%v)", addr, innermost(err))
	case errors.As(err, &record):
		return fmt.Errorf("the host at %s does not speak TLS: dial it as http:// or HOST:PORT (%v)", addr, innermost(err))
	case !isTLSAddr(addr) && (strings.Contains(err.Error(), "HTTP request to an HTTPS server") || strings.Contains(err.Error(), "but got 400")):
		return fmt.Errorf("the host at %s speaks TLS: dial it as https://%s", addr, hostPort(addr))
	}
	return nil
}

// isTLSAddr reports whether a host address names TLS (https:// or
// wss://).
func isTLSAddr(addr string) bool {
	return strings.HasPrefix(addr, "https://") || strings.HasPrefix(addr, "wss://")
}

// hostPort is the HOST:PORT of a host address, with or without a scheme.
func hostPort(addr string) string {
	if !strings.Contains(addr, "://") {
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return addr
	}
	if u.Port() == "" {
		switch u.Scheme {
		case "https", "wss":
			return u.Host + ":443"
		default:
			return u.Host + ":80"
		}
	}
	return u.Host
}

// httpBase is the http:// or https:// URL of a host address, ending in
// "/".
func httpBase(addr string) string {
	switch {
	case strings.HasPrefix(addr, "wss://"):
		addr = "https://" + strings.TrimPrefix(addr, "wss://")
	case strings.HasPrefix(addr, "ws://"):
		addr = "http://" + strings.TrimPrefix(addr, "ws://")
	case !strings.Contains(addr, "://"):
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + "/"
}
