package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Program is a seccomp-BPF program.
type Program []unix.SockFilter

// Instruction classes and modes used by filters.
const (
	LoadWord = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS // A = seccomp_data[k]
	JumpEq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	JumpGE   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	JumpSet  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	And      = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	Return   = unix.BPF_RET | unix.BPF_K
)

// Offsets into struct seccomp_data: the system call number, the audit
// architecture, and the low 32 bits of argument i (little-endian).
const (
	OffNr   = 0
	OffArch = 4
)

// OffArg returns the offset of the low 32 bits of argument i (0 to 5).
func OffArg(i int) uint32 { return 16 + 8*uint32(i) }

// Allow is the return value that lets a system call run.
const Allow = unix.SECCOMP_RET_ALLOW

// Errno is the return value that fails a system call with e.
func Errno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// Stmt is an instruction without jumps.
func Stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

// Jump is a conditional jump: jt or jf instructions ahead.
func Jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// Arch returns the AUDIT_ARCH_* value of this build's architecture, or 0
// where the assumptions of the filters (the system call numbers of
// package unix, arguments at [OffArg], little-endian) have not been
// checked.
func Arch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// X32Bit is set in the system call numbers of the x32 ABI, which shares
// x86-64's audit architecture: a filter of amd64 must refuse them, or a
// process could reach the same calls under other numbers.
const X32Bit = 0x40000000

// Prologue returns the start of a filter: calls of another architecture
// (a 32-bit process on a 64-bit kernel, whose socketcall(2) hides its
// arguments in memory) and, on amd64, of the x32 ABI fail with
// foreign; then the accumulator holds the system call number.
func Prologue(foreign uint32) Program {
	p := Program{
		Stmt(LoadWord, OffArch),
		Jump(JumpEq, Arch(), 1, 0),
		Stmt(Return, foreign),
		Stmt(LoadWord, OffNr),
	}
	if runtime.GOARCH == "amd64" {
		p = append(p, Jump(JumpGE, X32Bit, 0, 1), Stmt(Return, foreign))
	}
	return p
}

// Install applies p to the calling thread, which passes it on to the
// processes it forks; the caller must be locked to its thread. Without
// CAP_SYS_ADMIN a filter needs no_new_privs, which Install sets on the
// thread if the first attempt fails with EACCES.
func Install(p Program) error {
	if len(p) == 0 || len(p) > 4096 {
		return fmt.Errorf("seccomp: a program of %d instructions", len(p))
	}
	if Arch() == 0 {
		return errors.New("seccomp: the filters do not know the system calls of " + runtime.GOARCH)
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	err := install(&prog)
	if errors.Is(err, unix.EACCES) {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		err = install(&prog)
	}
	runtime.KeepAlive(p)
	return err
}

func install(prog *unix.SockFprog) error {
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(prog))); e != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", e)
	}
	return nil
}
