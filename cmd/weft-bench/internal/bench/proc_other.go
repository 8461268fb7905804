//go:build !linux

package bench

import (
	"errors"
	"os"
	"os/exec"
	"time"
)

var errNoProc = errors.New("needs Linux's /proc")

func setChildAttr(*exec.Cmd) {}

func killTree(p *os.Process) error { return p.Kill() }

func treeCPU(int) (time.Duration, error) { return 0, errNoProc }

func selfCPU() (time.Duration, error) { return 0, errNoProc }

type memStat struct {
	RSS, Anon, File, HWM int64
}

func readMem(int) (memStat, error) { return memStat{}, errNoProc }

func watchPeak(int, time.Duration) func() int64 { return func() int64 { return 0 } }
