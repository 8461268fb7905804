//go:build !linux

package testenv

import (
	"errors"
	"os/exec"
)

func supported(Lack) error { return errors.New("only Linux can take kernel features from a test") }

func startWithout(cmd *exec.Cmd, _ Lack) error { return cmd.Start() }

func check(Lack) error { return nil }
