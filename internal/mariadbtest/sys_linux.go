package mariadbtest

import "syscall"

// childAttr makes the kernel SIGKILL a child when the thread that started it
// exits. Go never ends the threads that run ordinary goroutines, so in
// practice that is when the test binary exits, however it exits.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processAlive reports whether a process with this id exists.
func processAlive(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
