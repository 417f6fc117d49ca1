package mariadbtest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// installTimeout bounds one mariadb-install-db run.
const installTimeout = 2 * time.Minute

// templatePrefix starts the name of the per-process template directory in
// os.TempDir(); the process id follows.
const templatePrefix = "mariadbtest-template-"

var tmpl struct {
	once sync.Once
	dir  string
	err  error
}

// installArgs are mariadb-install-db's arguments for datadir.
func installArgs(datadir string) []string {
	args := []string{
		"--no-defaults",
		"--datadir=" + datadir,
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
		logFileSizeArg,
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	return args
}

// install runs mariadb-install-db into datadir, which must not exist yet.
func install(installBin, datadir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, installBin, installArgs(datadir)...)
	cmd.SysProcAttr = childAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, tail(string(out), 30))
	}
	return nil
}

// template returns a freshly installed datadir that servers copy instead of
// installing their own. It is made once per process, in os.TempDir(), and
// removed by a later process once this one has exited (or by
// RemoveTemplate).
func template(installBin string) (string, error) {
	tmpl.once.Do(func() {
		sweepTemplates()
		dir, err := os.MkdirTemp("", templatePrefix+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			tmpl.err = err
			return
		}
		if err := install(installBin, filepath.Join(dir, "data")); err != nil {
			_ = os.RemoveAll(dir)
			tmpl.err = err
			return
		}
		tmpl.dir = dir
	})
	if tmpl.err != nil {
		return "", tmpl.err
	}
	return filepath.Join(tmpl.dir, "data"), nil
}

// RemoveTemplate removes this process's template datadir, if any. A TestMain
// may call it after m.Run; otherwise the next test binary that starts a
// server removes it. Start must not be called after it.
func RemoveTemplate() error {
	if tmpl.dir == "" {
		return nil
	}
	return os.RemoveAll(tmpl.dir)
}

// sweepTemplates removes the template directories of processes that are gone.
func sweepTemplates() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), templatePrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), templatePrefix)
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if !processAlive(pid) {
			_ = os.RemoveAll(m)
		}
	}
}

// copyDir copies the regular files and directories of src into dst, which
// must not exist.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm())
		case info.Mode().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, pipes: nothing a fresh server needs
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
