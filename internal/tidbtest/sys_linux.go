package tidbtest

import "syscall"

// childAttr makes the kernel SIGKILL a child when the thread that started it
// exits: in practice when the test binary exits, however it exits.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
