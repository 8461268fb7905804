// Package pgtest runs throwaway PostgreSQL clusters for tests: the server
// binaries of Debian's postgresql package (or any installation found on
// the machine), a data directory in a temporary directory, a Unix socket
// there and a TCP port on 127.0.0.1, stopped and removed at the end.
//
// A test binary shares one cluster ([Shared], closed by TestMain) and
// gives each test a database of its own ([Shared.Database]). A test that
// stops the server under a store (to see the store recover) starts a
// cluster of its own with [New].
//
// PostgreSQL refuses to run as root. When the tests run as root, initdb
// and the server run as the user postgres (made by Debian's package) or,
// failing that, nobody, through [syscall.SysProcAttr.Credential]; the
// temporary directory is given to that user. The tests themselves connect
// as the cluster's superuser, postgres, over the socket without a password
// (trust) or over TCP with [Cluster.Password] (scram-sha-256).
//
// The server is a child of the test process, started from a thread locked
// to the goroutine that waits for it, with a parent-death signal
// (SIGQUIT, PostgreSQL's immediate shutdown): a test binary that dies,
// or is killed by its timeout, takes its clusters with it.
//
// The cluster runs with fsync=off: a crash of the server loses nothing
// committed (the WAL reaches the kernel at every commit), a crash of the
// machine may; throwaway data needs no more.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"weft.dev/weft/internal/testenv"
)

// Superuser is the cluster's superuser.
const Superuser = "postgres"

// Cluster is one PostgreSQL server and its data directory. Its methods are
// safe for concurrent use.
type Cluster struct {
	bin      string // the directory holding initdb and postgres
	dir      string // the temporary directory: data/, the socket, server.log
	port     int
	password string
	cred     *syscall.Credential // the user the server runs as; nil: this one

	n atomic.Int64 // databases made so far

	// life serialises Start and Stop and guards the running server.
	life   sync.Mutex
	proc   *os.Process   // the running server, or nil
	exited chan struct{} // closed when proc has exited
}

// ErrNoServer reports that no PostgreSQL server binaries were found.
var ErrNoServer = errors.New("PostgreSQL server binaries (initdb, postgres) not found in PATH, /usr/lib/postgresql/*/bin or `pg_config --bindir`; install Debian's postgresql package")

// FindBin returns the directory holding the server binaries initdb and
// postgres: the directory of initdb found in PATH (through symbolic links:
// Debian keeps them in /usr/lib/postgresql/N/bin), else the newest
// /usr/lib/postgresql/N/bin, else what `pg_config --bindir` says. It
// returns ErrNoServer when none has both.
func FindBin() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { return version(b) - version(a) })
	dirs = append(dirs, versions...)
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoServer
}

// version is N of /usr/lib/postgresql/N/bin, or 0.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// New initialises a cluster in a new temporary directory and starts it.
// The caller closes it with [Cluster.Close]. It returns ErrNoServer when
// the binaries are missing; any other error carries initdb's or the
// server's output.
func New(ctx context.Context) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, password: randomHex(12)}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err != nil {
			return nil, err
		}
	}
	if c.dir, err = os.MkdirTemp("", "weft-pg-"); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(c.dir)
		}
	}()
	if c.cred != nil {
		// The server's user owns the directory; root (the tests) can
		// still reach the socket and the log.
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, err
		}
	}
	pwfile := filepath.Join(c.dir, "pw")
	if err := os.WriteFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(pwfile, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := c.command(ctx, "initdb", "-D", c.data(), "-U", Superuser, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb (as %s): %v\n%s", c.user(), err, out)
	}
	os.Remove(pwfile)
	// The port is free when asked; should another process take it before
	// the server binds it, try another.
	for try := 0; ; try++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		err = c.Start(ctx)
		if err == nil || try == 2 || !strings.Contains(err.Error(), "could not bind") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// unprivileged returns the credentials of the user postgres, or of
// nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("pgtest: running as root, and neither the user postgres nor nobody exists to run PostgreSQL as (it refuses to run as root)")
}

func (c *Cluster) user() string {
	if c.cred == nil {
		return "the current user"
	}
	if u, err := user.LookupId(strconv.Itoa(int(c.cred.Uid))); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(int(c.cred.Uid))
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// SocketDir is the directory of the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.dir }

// Port is the server's TCP port on 127.0.0.1 (also the number in the
// socket's name).
func (c *Cluster) Port() int { return c.port }

// Password is the superuser's password, needed over TCP.
func (c *Cluster) Password() string { return c.password }

// command runs a server binary as the cluster's user, in its directory,
// with a clean environment (no PG* variables of the caller's).
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	return cmd
}

// Start starts the server (again, after [Cluster.Stop]) and waits until it
// accepts connections. A server already running is left as is.
func (c *Cluster) Start(ctx context.Context) error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.proc != nil {
		return nil
	}
	logPath := filepath.Join(c.dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := c.command(context.Background(), "postgres", "-D", c.data(),
		"-c", "port="+strconv.Itoa(c.port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+c.dir, "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	// The parent-death signal fires when the thread that started the
	// child ends: start it from a thread that belongs to this goroutine
	// alone and ends only after the server has exited.
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	// Wait for the server to accept connections, or to exit.
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := c.connect(ctx, "postgres")
		if err == nil {
			conn.Close(ctx)
			c.proc, c.exited = cmd.Process, exited
			return nil
		}
		var failed error
		select {
		case <-exited:
			failed = errors.New("the server exited")
		case <-ctx.Done():
			failed = ctx.Err()
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				failed = fmt.Errorf("the server does not accept connections: %v", err)
			}
		}
		if failed != nil {
			kill(cmd.Process, exited)
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("start postgres (as %s, port %d): %v\n%s", c.user(), c.port, failed, log)
		}
	}
}

// Stop shuts the server down at once (SIGQUIT, as `pg_ctl stop -m
// immediate` does: like a crash, recovered from the WAL at the next start)
// and waits for it to exit. The data stays; [Cluster.Start] starts it
// again on the same port. Stopping a stopped server does nothing.
func (c *Cluster) Stop() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.proc == nil {
		return nil
	}
	err := kill(c.proc, c.exited)
	c.proc, c.exited = nil, nil
	return err
}

// kill ends the server proc, whose waiter closes exited.
func kill(proc *os.Process, exited <-chan struct{}) error {
	proc.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		proc.Kill()
		<-exited
		return errors.New("postgres did not stop within 30s of SIGQUIT; killed it")
	}
}

// Close stops the server and removes its directory. It is safe to call
// more than once.
func (c *Cluster) Close() error {
	err := c.Stop()
	if c.dir != "" {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
}

// URL returns the URL of database db as the superuser over the Unix
// socket (no password needed).
func (c *Cluster) URL(db string) string {
	q := url.Values{"host": {c.dir}, "port": {strconv.Itoa(c.port)}, "user": {Superuser}, "sslmode": {"disable"}}
	return (&url.URL{Scheme: "postgres", Path: "/" + db, RawQuery: q.Encode()}).String()
}

// TCPURL returns the URL of database db as user with password over TCP
// to 127.0.0.1.
func (c *Cluster) TCPURL(db, user, password string) string {
	u := &url.URL{Scheme: "postgres", User: url.UserPassword(user, password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

func (c *Cluster) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return pgx.Connect(ctx, c.URL(db))
}

// Exec runs sql in database db as the superuser.
func (c *Cluster) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := c.connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// CreateDatabase makes a new, empty database and returns its name
// (t_1, t_2 …). It lives until the cluster is closed.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name := "t_" + strconv.FormatInt(c.n.Add(1), 10)
	if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// Database returns the URL of a new, empty database for t, failing t if
// it cannot be made.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	name, err := c.CreateDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c.URL(name)
}

// Shared is a cluster shared by the tests of one test binary: started by
// the first test that asks for it, closed by TestMain with
// [Shared.Close]. The zero value is ready to use.
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Cluster returns the shared cluster, starting it on first use. When no
// server binaries are found it skips t, saying what to install, unless
// the environment variable CI is set ([testenv.CI]): then it fails t,
// because CI must run these tests. Any other failure to start fails t.
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	s.once.Do(func() { s.c, s.err = New(context.Background()) })
	if errors.Is(s.err, ErrNoServer) {
		Skip(t, s.err)
	}
	if s.err != nil {
		t.Fatalf("start the test PostgreSQL cluster: %v", s.err)
	}
	return s.c
}

// Database returns the URL of a new, empty database on the shared
// cluster.
func (s *Shared) Database(t testing.TB) string {
	t.Helper()
	return s.Cluster(t).Database(t)
}

// Close closes the cluster if it was started.
func (s *Shared) Close() error {
	s.once.Do(func() { s.err = errors.New("pgtest: shared cluster closed") })
	if s.c == nil {
		return nil
	}
	return s.c.Close()
}

// Skip skips t because of err (the server binaries are missing), or fails
// it under CI ([testenv.Missing]): .ci/run installs the package.
func Skip(t testing.TB, err error) {
	t.Helper()
	testenv.Missing(t, "%v", err)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
