package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"weft.dev/weft/api"
	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	file   string // its certificate, PEM
	serial int64  // the last serial issued
}

// newTestCA makes a CA and writes its certificate to dir/name.pem.
func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+".pem"), serial: 1}
	writeAtomic(t, ca.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// pool is a pool holding the CA alone.
func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue makes a host certificate for hosts (IP addresses or DNS names)
// and writes it and its key to certFile and keyFile, each replaced by a
// rename as rotation tools do. It returns the certificate's serial.
func (ca *testCA) issue(t *testing.T, certFile, keyFile string, hosts ...string) int64 {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeAtomic(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	return ca.serial
}

// writeAtomic replaces path with b through a rename.
func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedSerial does a TLS handshake with addr, trusting pool, and
// returns the serial of the certificate the host presented.
func servedSerial(t *testing.T, addr string, pool *x509.CertPool) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestServeTLS: `weft serve --tls-cert --tls-key` serves HTTPS and WSS.
// A `weft ps` that finds the host by its host file dials it over TLS and
// trusts the private CA of WEFT_TLS_CA (or --tls-ca); without the CA it
// is refused with what to do, and a plain-HTTP address to it says that it
// speaks TLS. Rotating the key pair's files changes the certificate of
// the next handshake, without a restart; a broken pair written in its
// place is not served, and the last good one goes on.
func TestServeTLS(t *testing.T) {
	e := newEnv(t)
	ca := newTestCA(t, e.dir, "ca")
	certFile, keyFile := filepath.Join(e.dir, "host.crt"), filepath.Join(e.dir, "host.key")
	first := ca.issue(t, certFile, keyFile, "127.0.0.1", "localhost")
	addr := freeAddr(t)
	srv := e.serve(addr, "--tls-cert", certFile, "--tls-key", keyFile)
	t.Cleanup(func() { srv.Process.Signal(os.Interrupt); srv.Wait() })

	withCA := []string{"WEFT_TLS_CA=" + ca.file}
	run := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		c := e.cmd(args...)
		c.Env = append(c.Env, env...)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		c.Run()
		return out.String(), errb.String(), c.ProcessState.ExitCode()
	}
	// Found by its host file, which records the scheme.
	if out, stderr, code := run(withCA, "ps"); code != 0 {
		t.Fatalf("weft ps with WEFT_TLS_CA: %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := run(nil, "--tls-ca", ca.file, "--host", "https://localhost:"+strings.Split(addr, ":")[1], "ps"); code != 0 {
		t.Fatalf("weft --tls-ca --host https://localhost:PORT ps: %d\n%s%s", code, out, stderr)
	}
	// Without the CA: the system's roots do not know it.
	if _, stderr, code := run(nil, "ps"); code == 0 || !strings.Contains(stderr, "--tls-ca") || !strings.Contains(stderr, "does not trust") {
		t.Fatalf("weft ps without the CA: exit %d\n%s\nwant a refusal naming --tls-ca", code, stderr)
	}
	// Another CA is no better.
	other := newTestCA(t, e.dir, "other")
	if _, stderr, code := run([]string{"WEFT_TLS_CA=" + other.file}, "ps"); code == 0 || !strings.Contains(stderr, "does not trust") {
		t.Fatalf("weft ps trusting another CA: exit %d\n%s\nwant a refusal", code, stderr)
	}
	// Plain HTTP to the TLS port.
	if _, stderr, code := run(withCA, "--host", addr, "ps"); code == 0 || !strings.Contains(stderr, "speaks TLS") {
		t.Fatalf("weft --host %s ps (plain HTTP to a TLS host): exit %d\n%s\nwant a refusal saying it speaks TLS", addr, code, stderr)
	}
	// A run through the host over WSS.
	echo := e.script("echo.json", `{"steps":[{"text":"over tls"}]}`)
	if out, stderr, code := run(withCA, "run", "-m", "scripted:"+echo, "-p", "hi"); code != 0 || !strings.Contains(out, "over tls") {
		t.Fatalf("weft run through the TLS host: %d\n%s%s", code, out, stderr)
	}

	pool := ca.pool()
	if got := servedSerial(t, addr, pool); got != first {
		t.Fatalf("served serial %d; want %d", got, first)
	}
	second := ca.issue(t, certFile, keyFile, "127.0.0.1", "localhost")
	if got := servedSerial(t, addr, pool); got != second {
		t.Fatalf("after rotation the host served serial %d; want the new %d", got, second)
	}
	// A key that belongs to another certificate: the last good pair
	// stays.
	spare := filepath.Join(e.dir, "spare")
	ca.issue(t, spare+".crt", spare+".key", "127.0.0.1")
	kb, err := os.ReadFile(spare + ".key")
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, keyFile, kb)
	if got := servedSerial(t, addr, pool); got != second {
		t.Fatalf("after a mismatched key was written the host served serial %d; want the last good %d", got, second)
	}
	if _, stderr, code := run(withCA, "ps"); code != 0 {
		t.Fatalf("weft ps after a bad rotation: %d\n%s", code, stderr)
	}
	third := ca.issue(t, certFile, keyFile, "127.0.0.1", "localhost")
	if got := servedSerial(t, addr, pool); got != third {
		t.Fatalf("after a good pair followed the bad one the host served serial %d; want %d", got, third)
	}
}

// TestServeTLSRefusesBadPair: a missing half, an empty, unreadable or
// mismatched pair, and an --advertise whose scheme contradicts the
// listener each stop `weft serve` before it listens, saying why.
func TestServeTLSRefusesBadPair(t *testing.T) {
	e := newEnv(t)
	ca := newTestCA(t, e.dir, "ca")
	certFile, keyFile := filepath.Join(e.dir, "host.crt"), filepath.Join(e.dir, "host.key")
	ca.issue(t, certFile, keyFile, "127.0.0.1")
	otherCert, otherKey := filepath.Join(e.dir, "other.crt"), filepath.Join(e.dir, "other.key")
	ca.issue(t, otherCert, otherKey, "127.0.0.1")
	empty := filepath.Join(e.dir, "empty.pem")
	writeFile(t, empty, "", 0o600)
	garbage := filepath.Join(e.dir, "garbage.pem")
	writeFile(t, garbage, "not a certificate\n", 0o600)
	for _, tt := range []struct {
		name  string
		flags []string
		code  int
		want  string
	}{
		{"cert alone", []string{"--tls-cert", certFile}, exitUsage, "--tls-cert and --tls-key go together"},
		{"key alone", []string{"--tls-key", keyFile}, exitUsage, "--tls-cert and --tls-key go together"},
		{"empty cert", []string{"--tls-cert", empty, "--tls-key", keyFile}, exitFailed, "is empty"},
		{"missing key", []string{"--tls-cert", certFile, "--tls-key", filepath.Join(e.dir, "nope.key")}, exitFailed, "no such file"},
		{"garbage cert", []string{"--tls-cert", garbage, "--tls-key", keyFile}, exitFailed, "PEM"},
		{"mismatched", []string{"--tls-cert", certFile, "--tls-key", otherKey}, exitFailed, "does not match"},
		{"https advertise without TLS", []string{"--advertise", "https://127.0.0.1:7000"}, exitUsage, "serves plain HTTP"},
		{"http advertise with TLS", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--advertise", "http://127.0.0.1:7000"}, exitUsage, "serves TLS"},
		{"bad CA", []string{"--tls-cert", certFile, "--tls-key", keyFile, "--tls-ca", garbage}, exitFailed, "no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := freeAddr(t)
			stderr, code := e.refused(nil, append([]string{"serve", "--listen", addr}, tt.flags...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d\n%s\nwant exit %d saying %q", code, stderr, tt.code, tt.want)
			}
			if ln, err := net.Listen("tcp", addr); err != nil {
				t.Fatalf("the refused host left %s bound: %v", addr, err)
			} else {
				ln.Close()
			}
		})
	}
}

// TestCertReloader: the reloader serves the pair it started with, the
// next one once the files change, the last good one while the files hold
// a pair that does not load (logged once), and a good pair written after
// that.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	certFile, keyFile := filepath.Join(dir, "host.crt"), filepath.Join(dir, "host.key")
	first := ca.issue(t, certFile, keyFile, "127.0.0.1")
	var logs bytes.Buffer
	r, err := newCertReloader(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		t.Helper()
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.Int64()
	}
	if got := serial(); got != first {
		t.Fatalf("serial %d; want %d", got, first)
	}
	second := ca.issue(t, certFile, keyFile, "127.0.0.1")
	if got := serial(); got != second {
		t.Fatalf("after rotation: serial %d; want %d", got, second)
	}
	writeAtomic(t, certFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"))
	for range 3 {
		if got := serial(); got != second {
			t.Fatalf("with a broken cert file: serial %d; want the last good %d", got, second)
		}
	}
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Fatalf("the broken pair was logged %d times; want once:\n%s", n, logs.String())
	}
	third := ca.issue(t, certFile, keyFile, "127.0.0.1")
	if got := serial(); got != third {
		t.Fatalf("after a good pair: serial %d; want %d", got, third)
	}
}

// TestClusterTLSForwarding: three hosts on one PostgreSQL, each serving
// TLS with a certificate of one private CA and advertising
// https://127.0.0.1:PORT. A run/start through host B for a session host A
// owns is forwarded over TLS, with B verifying A's certificate. Host C
// does not trust the CA (no WEFT_TLS_CA): its forwarding is refused on
// the certificate, never sent without verification.
func TestClusterTLSForwarding(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	cl := newClusterWith(t, 3, 5*time.Second, func(i int, e *testEnv, addr string) []string {
		cert, key := filepath.Join(e.dir, "host.crt"), filepath.Join(e.dir, "host.key")
		ca.issue(t, cert, key, "127.0.0.1")
		if i < 2 {
			e.env = append(e.env, "WEFT_TLS_CA="+ca.file)
		}
		return []string{"--tls-cert", cert, "--tls-key", key, "--advertise", "https://" + addr}
	})
	cl.tls = &tls.Config{RootCAs: ca.pool()}
	for i := range cl.addrs {
		cl.addrs[i] = "https://" + cl.addrs[i]
	}
	e := cl.envs[0]
	hang := e.script("hang.json", `{"steps":[{"text":"never","delayMs":3600000}]}`)
	echo := e.script("echo.json", `{"loop":true,"steps":[{"text":"echo {{input}}","delayMs":1}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b, c := cl.dial(ctx, 0), cl.dial(ctx, 1), cl.dial(ctx, 2)
	s, err := a.CreateSession(ctx, api.CreateSessionParams{Model: "scripted:" + echo})
	if err != nil {
		t.Fatal(err)
	}
	active, err := a.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("first")), Model: "scripted:" + hang})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("second")), Busy: api.BusyQueue})
	if err != nil {
		t.Fatalf("run/start through host B, forwarded over TLS: %v", err)
	}
	if r.Status != record.RunQueued {
		t.Fatalf("the forwarded run: %s; want queued behind the owner's active run", r.Status)
	}
	_, err = c.StartRun(ctx, api.StartRunParams{SessionID: s.ID, Input: api.Input(event.TextParts("third")), Busy: api.BusyQueue})
	if err == nil || !strings.Contains(err.Error(), "does not trust") {
		t.Fatalf("run/start through host C, which does not trust the CA: %v; want a refusal on the certificate", err)
	}
	if _, err := b.CancelRun(ctx, api.CancelParams{RunID: active.ID}); err != nil {
		t.Fatalf("run/cancel through host B: %v", err)
	}
	if !poll(20*time.Second, func() bool {
		got, err := b.GetRun(ctx, api.RunIDParams{RunID: r.ID})
		return err == nil && got.Status == record.RunCompleted
	}) {
		t.Fatal("the run queued through host B did not complete")
	}
}
