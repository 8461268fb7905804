package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hostRecord is what `weft serve` writes to its host file,
// STATE/hosts/PID.json, so that a client finds the host on any address.
// It names where the token is, never the token itself.
type hostRecord struct {
	// PID is the host's process.
	PID int `json:"pid"`
	// Addr is the address the host listens on, as clients dial it:
	// HOST:PORT.
	Addr string `json:"addr"`
	// Scheme is "https" for a host that serves TLS (--tls-cert); ""
	// for plain HTTP.
	Scheme string `json:"scheme,omitempty"`
	// TokenFile is the path of the token file the host accepts; "" when
	// the token came from WEFT_TOKEN or the host needs none.
	TokenFile string `json:"tokenFile,omitempty"`
	// TokenFrom is "file", "env" (WEFT_TOKEN) or "none"
	// (--insecure-no-auth).
	TokenFrom string `json:"tokenFrom"`
	// Cwd is the host's working directory, for people telling hosts apart.
	Cwd string `json:"cwd,omitempty"`
	// Started is when the host began serving.
	Started time.Time `json:"started"`

	path string // the file it was read from
}

// dialAddr is the address a client dials to reach the host: Addr, as
// an https:// URL for a host that serves TLS.
func (r *hostRecord) dialAddr() string {
	if r.Scheme == "https" {
		return "https://" + r.Addr
	}
	return r.Addr
}

// maxHostFile bounds what a client reads of one host file.
const maxHostFile = 16 << 10

// hostsDir is the directory of the host files.
func (a *app) hostsDir() (string, error) {
	dir, err := a.stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "hosts"), nil
}

// writeHostFile publishes rec as this process's host file, atomically
// (written and synced under a temporary name, then renamed), mode 0600
// in a directory of mode 0700, and returns the function that removes it,
// which a clean exit calls.
func (a *app) writeHostFile(rec hostRecord) (remove func(), err error) {
	dir, err := a.hostsDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host file: %w", err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, strconv.Itoa(rec.PID)+".json")
	f, err := os.CreateTemp(dir, ".host-*")
	if err != nil {
		return nil, fmt.Errorf("host file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return nil, fmt.Errorf("host file %s: %w", path, err)
	}
	return func() { os.Remove(path) }, nil
}

// checkPrivateDir refuses a directory that is not this user's or that
// others can write to: they could plant a host file there.
func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || (ok && int(st.Uid) != os.Getuid()) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is not a private directory of this user (mode %#o): remove it, or chmod 700 it if it is yours", dir, fi.Mode().Perm())
	}
	return nil
}

// liveHosts reads the host files and returns the hosts that are alive,
// by address. A file whose process is gone, or whose address no longer
// accepts connections, is stale: it is removed and skipped. A file that
// is not this user's, or that others could write, is skipped and left
// alone: a client never dials an address another user chose.
func (a *app) liveHosts() ([]hostRecord, error) {
	dir, err := a.hostsDir()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host files: %w", err)
	}
	if err := checkPrivateDir(dir); err != nil {
		return nil, nil
	}
	var live []hostRecord
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(dir, name)
		rec, ok := readHostFile(path)
		if !ok {
			continue
		}
		if !alive(rec.PID) || !accepts(rec.Addr) {
			os.Remove(path)
			continue
		}
		live = append(live, rec)
	}
	slices.SortFunc(live, func(x, y hostRecord) int { return x.Started.Compare(y.Started) })
	return live, nil
}

// readHostFile reads the host file at path, if it is a regular file of
// this user that no one else can write, and well formed.
func readHostFile(path string) (hostRecord, bool) {
	var rec hostRecord
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return rec, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return rec, false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return rec, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHostFile))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.PID <= 0 || rec.Addr == "" {
		return rec, false
	}
	rec.path = path
	return rec, true
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// accepts reports whether addr accepts a TCP connection.
func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// hostChoice is the host a client command talks to and why.
type hostChoice struct {
	addr string
	// from says where addr came from: "--host", "WEFT_HOST", the host
	// file's path, or "" for the default.
	from string
	rec  *hostRecord // the host file chosen; nil without one
	err  error       // several live hosts and no --host
}

// chooseHost picks the host of a client command, once: --host or
// WEFT_HOST when set; else the one live host of the state directory;
// else the default address. With several live hosts and neither, err
// lists them.
func (a *app) chooseHost() *hostChoice {
	a.hostOnce.Do(func() {
		ch := &hostChoice{addr: defaultListen}
		a.chosen = ch
		if a.host != "" {
			ch.addr, ch.from = a.host, "--host"
			if a.getenv("WEFT_HOST") == a.host {
				ch.from = "WEFT_HOST"
			}
			return
		}
		live, err := a.liveHosts()
		if err != nil {
			ch.err = err
			return
		}
		switch len(live) {
		case 0:
		case 1:
			ch.addr, ch.from, ch.rec = live[0].dialAddr(), live[0].path, &live[0]
		default:
			var b strings.Builder
			for _, h := range live {
				fmt.Fprintf(&b, "\n  %s (pid %d", h.dialAddr(), h.PID)
				if h.Cwd != "" {
					fmt.Fprintf(&b, ", started in %s", h.Cwd)
				}
				b.WriteString(")")
			}
			dir, _ := a.hostsDir()
			ch.err = fmt.Errorf("%d weft hosts run (recorded in %s); choose one with --host ADDR or WEFT_HOST=ADDR:%s", len(live), dir, b.String())
		}
	})
	return a.chosen
}

// noHostError says that no host answers where this command looked, how
// to point it at one, and what else to do (hint), without the layers of
// the dial's error (WebSocket, HTTP, TCP): only a cause other than a
// refused connection is kept, in its innermost words.
func (a *app) noHostError(hint string, cause error) error {
	ch := a.chooseHost()
	where := ch.from
	switch {
	case where == "":
		dir, err := a.hostsDir()
		if err != nil {
			dir = "the state directory"
		}
		where = "the default; no `weft serve` recorded in " + dir
	case ch.rec != nil:
		where = "recorded in " + where
	}
	err := fmt.Errorf("%w at %s (%s): %s; for a host on another address pass --host ADDR or set WEFT_HOST", errNoHost, ch.addr, where, hint)
	if cause != nil && !errors.Is(cause, syscall.ECONNREFUSED) {
		err = fmt.Errorf("%w (%v)", err, innermost(cause))
	}
	return err
}

// clientAddr is the address a client on this machine dials to reach a
// listener at la: a wildcard host (0.0.0.0, ::) becomes the loopback.
func clientAddr(la net.Addr) string {
	tcp, ok := la.(*net.TCPAddr)
	if !ok {
		return la.String()
	}
	ip := tcp.IP
	switch {
	case ip.IsUnspecified() && ip.To4() != nil:
		ip = net.IPv4(127, 0, 0, 1)
	case ip.IsUnspecified():
		ip = net.IPv6loopback
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}
