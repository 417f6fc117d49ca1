package mariadbtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// killWait bounds the wait for a killed process to be reaped.
const killWait = 10 * time.Second

// process is one running mariadbd.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // cmd.Wait's result, set before done is closed
}

// spawn starts bin with args, appending its output to logPath.
func spawn(bin string, args []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *process) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.wait(killWait)
}

// stop sends SIGTERM and waits up to timeout, then kills.
func (p *process) stop(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if err := p.wait(timeout); err != nil {
		return errors.Join(err, p.kill())
	}
	if p.err != nil {
		return fmt.Errorf("mariadbd exited after SIGTERM: %w", p.err)
	}
	return nil
}

func (p *process) wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("pid %d still running after %v", p.cmd.Process.Pid, timeout)
	}
}
