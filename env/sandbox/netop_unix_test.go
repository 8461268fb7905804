//go:build unix

package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netArg makes the test binary, run as a sandboxed "shell", try one
// network operation (see netOp) and exit 0 when it worked, 3 when not.
const netArg = "__net"

// netOp is the test binary's network operation, args following netArg:
//
//	udp ADDR             send a datagram to ADDR and wait for the reply
//	dns ADDR NAME        look NAME up at the DNS server ADDR (over UDP)
//	socket FAM TYPE PROTO  create a socket (numbers, as socket(2) takes them)
//	tcp ADDR             connect to ADDR
//	kill PID             kill(PID, 0): may a signal be sent to PID?
//	mem N                allocate and touch N bytes, then exit
//	write FILE N         write N bytes to FILE, SIGXFSZ ignored
func netOp(args []string) int {
	fail := func(err error) int {
		fmt.Println(args[0]+":", err)
		return 3
	}
	switch {
	case args[0] == "udp" && len(args) == 2:
		c, err := net.Dial("udp", args[1])
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("ping")); err != nil {
			return fail(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 16)); err != nil {
			return fail(err)
		}
	case args[0] == "dns" && len(args) == 3:
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", args[1])
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		addrs, err := r.LookupHost(ctx, args[2])
		if err != nil {
			return fail(err)
		}
		fmt.Println(addrs)
	case args[0] == "socket" && len(args) == 4:
		var n [3]int
		for i := range n {
			n[i], _ = strconv.Atoi(args[1+i])
		}
		fd, err := unix.Socket(n[0], n[1], n[2])
		if err != nil {
			return fail(err)
		}
		unix.Close(fd)
	case args[0] == "tcp" && len(args) == 2:
		c, err := net.Dial("tcp", args[1])
		if err != nil {
			return fail(err)
		}
		c.Close()
	case args[0] == "kill" && len(args) == 2:
		pid, err := strconv.Atoi(args[1])
		if err != nil {
			return fail(err)
		}
		if err := unix.Kill(pid, 0); err != nil {
			return fail(err)
		}
	case args[0] == "mem" && len(args) == 2:
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return fail(err)
		}
		b := make([]byte, n)
		for i := 0; i < n; i += 4096 {
			b[i] = 1
		}
		fmt.Println(len(b))
	case args[0] == "write" && len(args) == 3:
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return fail(err)
		}
		signal.Ignore(syscall.SIGXFSZ)
		f, err := os.Create(args[1])
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if _, err := f.Write(make([]byte, n)); err != nil {
			return fail(err)
		}
	default:
		return fail(errors.New("bad arguments"))
	}
	fmt.Println("ok")
	return 0
}
