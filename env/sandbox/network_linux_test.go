//go:build linux

package sandbox_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	"weft.dev/weft/env/sandbox"
	"weft.dev/weft/internal/testenv"
)

// udpServer answers every datagram it gets (a DNS query with one A
// record, 192.0.2.1, anything else with "pong") and counts them.
type udpServer struct {
	conn *net.UDPConn
	got  atomic.Int64
}

func newUDPServer(t *testing.T) *udpServer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &udpServer{conn: c}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			s.got.Add(1)
			c.WriteToUDP(dnsAnswer(buf[:n]), from)
		}
	}()
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	return s
}

func (s *udpServer) addr() string { return s.conn.LocalAddr().String() }

// dnsAnswer answers a DNS query for an A record with 192.0.2.1, and
// anything else with "pong".
func dnsAnswer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return []byte("pong")
	}
	end := 12
	for end < len(q) && q[end] != 0 {
		end += int(q[end]) + 1
	}
	end += 5 // the root label, type and class
	if end > len(q) {
		return []byte("pong")
	}
	a := append([]byte(nil), q[:end]...)
	a[2], a[3] = 0x81, 0x80                      // a response, recursion desired and available, no error
	binary.BigEndian.PutUint16(a[6:], 0)         // answers, set below when the type is A
	binary.BigEndian.PutUint16(a[8:], 0)         // authority
	binary.BigEndian.PutUint16(a[10:], 0)        // additional
	if binary.BigEndian.Uint16(q[end-4:]) == 1 { // type A
		binary.BigEndian.PutUint16(a[6:], 1)
		a = append(a, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1)
	}
	return a
}

// netPolicy is a policy under which the test binary may run as the
// "shell".
func netPolicy(t *testing.T, l layout, cfg sandbox.Config) sandbox.Policy {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ReadOnly = append(cfg.ReadOnly, self)
	cfg.TempRoot = t.TempDir()
	return l.policy(cfg)
}

// runNet runs the test binary's netOp under p and returns its output,
// exit code and the command's status.
func runNet(t *testing.T, p sandbox.Policy, args ...string) (string, int, sandbox.Status) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := sandbox.Command(t.Context(), p, self, append([]string{netArg}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.Dir = p.Mounts[0].Path
	out, _ := c.CombinedOutput()
	return string(out), c.ProcessState.ExitCode(), c.Status
}

// TestNetworkDenyIsTotal: with the network denied, a sandboxed command
// reaches nothing of the host's network, whatever the protocol: not a
// UDP server on the host's loopback, nor a DNS server there, nor TCP.
// Landlock ABI 7 alone restricts TCP only. With the network allowed,
// all of them work.
func TestNetworkDenyIsTotal(t *testing.T) {
	testenv.Landlock(t, 1)
	testenv.NetNamespace(t)
	l := newLayout(t)
	udp := newUDPServer(t)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go acceptAll(tcp)

	deny := netPolicy(t, l, sandbox.Config{})
	for _, op := range [][]string{
		{"udp", udp.addr()},
		{"dns", udp.addr(), "weft.test"},
		{"tcp", tcp.Addr().String()},
	} {
		out, code, st := runNet(t, deny, op...)
		if code == 0 || st.NetworkDeniedBy != sandbox.DeniedByNamespace {
			t.Errorf("deny (by %q): %s reached the host:\n%s", st.NetworkDeniedBy, op[0], out)
		}
	}
	if n := udp.got.Load(); n != 0 {
		t.Errorf("deny: the host's UDP server got %d datagrams", n)
	}

	allow := netPolicy(t, l, sandbox.Config{Network: sandbox.NetworkAllow})
	for _, op := range [][]string{
		{"udp", udp.addr()},
		{"dns", udp.addr(), "weft.test"},
		{"tcp", tcp.Addr().String()},
	} {
		out, code, _ := runNet(t, allow, op...)
		if code != 0 {
			t.Errorf("allow: %s failed:\n%s", op[0], out)
		}
	}
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// TestNetworkDenyWithoutNamespaces: where no network namespace can be
// made (a container's seccomp policy here), a denied network is taken
// away by a seccomp filter and Landlock: the socket families and types
// Landlock cannot see are refused at socket(2), TCP's connect by
// Landlock from ABI 4 and its socket by the filter below it, and UNIX
// sockets still work.
func TestNetworkDenyWithoutNamespaces(t *testing.T) {
	if testenv.Without(t, testenv.NoNamespaces) {
		return
	}
	kernel := testenv.Landlock(t, 1)
	l := newLayout(t)
	udp := newUDPServer(t)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go acceptAll(tcp)
	sock := func(fam, typ, proto int) []string {
		return []string{"socket", strconv.Itoa(fam), strconv.Itoa(typ), strconv.Itoa(proto)}
	}
	refused := map[string][]string{
		"udp":         {"udp", udp.addr()},
		"dns":         {"dns", udp.addr(), "weft.test"},
		"tcp":         {"tcp", tcp.Addr().String()},
		"udp socket":  sock(unix.AF_INET, unix.SOCK_DGRAM, 0),
		"udp6 socket": sock(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0),
		"ping socket": sock(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP),
		"raw socket":  sock(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP),
		"mptcp":       sock(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP),
		"sctp":        sock(unix.AF_INET, unix.SOCK_SEQPACKET, unix.IPPROTO_SCTP),
		"packet":      sock(unix.AF_PACKET, unix.SOCK_RAW, 0),
		"vsock":       sock(unix.AF_VSOCK, unix.SOCK_STREAM, 0),
	}
	for abi := 1; abi <= kernel; abi++ {
		t.Run(fmt.Sprintf("ABI_%d", abi), func(t *testing.T) {
			p := netPolicy(t, l, sandbox.Config{LandlockABI: abi})
			for name, op := range refused {
				out, code, st := runNet(t, p, op...)
				if code != 3 || st.NetworkDeniedBy != sandbox.DeniedBySeccomp || !st.TCPDenied || !st.UDPDenied || st.Warning() != "" {
					t.Errorf("%s: exit %d, status %+v:\n%s", name, code, st, out)
				}
				if op[0] == "socket" && !strings.Contains(out, "permission denied") {
					t.Errorf("%s: not refused by the filter:\n%s", name, out)
				}
			}
			out, code, _ := runNet(t, p, sock(unix.AF_UNIX, unix.SOCK_STREAM, 0)...)
			if code != 0 {
				t.Errorf("a UNIX socket was refused:\n%s", out)
			}
			// A TCP socket is left to Landlock, which refuses its
			// connect from ABI 4; below, the filter refuses the socket.
			out, code, _ = runNet(t, p, sock(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)...)
			if (code == 0) != (abi >= 4) {
				t.Errorf("a TCP socket at ABI %d: exit %d:\n%s", abi, code, out)
			}
		})
	}
	if n := udp.got.Load(); n != 0 {
		t.Errorf("the host's UDP server got %d datagrams", n)
	}
}
