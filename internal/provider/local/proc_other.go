//go:build !linux

package local

import (
	"errors"
	"os"
	"syscall"
)

// The executor identifies processes through /proc and reaps through
// waitid(WNOWAIT); without them it cannot keep its guarantees, so on other
// systems New refuses to run rather than run unsafely.

var errUnsupported = errors.New("the local executor requires Linux")

type procInfo struct {
	pid   int
	state byte
	ppid  int
	pgrp  int
	sid   int
	start uint64
}

type pidfd struct{}

func openPidfd(int) (*pidfd, error)        { return nil, errUnsupported }
func (*pidfd) signal(syscall.Signal) error { return errUnsupported }
func (*pidfd) wait() error                 { return errUnsupported }
func (*pidfd) close()                      {}

func (p procInfo) live() bool        { return false }
func readProc(int) (procInfo, error) { return procInfo{}, errUnsupported }
func scanProcs() ([]procInfo, error) { return nil, errUnsupported }
func environHas(int, ...string) bool { return false }
func bootID() (string, error)        { return "", errUnsupported }
func waitExited(int) error           { return errUnsupported }
func killGroup(int) error            { return errUnsupported }
func lockDir(*os.File) error         { return errUnsupported }
func platformSupported() error       { return errUnsupported }
