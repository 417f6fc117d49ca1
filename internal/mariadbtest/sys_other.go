//go:build !linux

package mariadbtest

import "syscall"

// childAttr has no parent-death signal outside Linux: a test binary killed
// with SIGKILL leaves its servers running there.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// processAlive cannot tell outside Linux; templates are then never swept.
func processAlive(int) bool { return true }
