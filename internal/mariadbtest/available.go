package mariadbtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries looked up by Available, in $PATH and then in these directories.
var searchDirs = []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/local/mysql/bin"}

// lookBin finds an executable named name in $PATH or searchDirs.
func lookBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range searchDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(name + " not found in $PATH or " + strings.Join(searchDirs, ", "))
}

// binaries returns the paths of mariadbd and mariadb-install-db.
func binaries() (server, install string, err error) {
	if server, err = lookBin("mariadbd"); err != nil {
		return "", "", err
	}
	if install, err = lookBin("mariadb-install-db"); err != nil {
		return "", "", err
	}
	return server, install, nil
}

// Available reports whether the MariaDB server binaries (mariadbd and
// mariadb-install-db) are installed, and if not, why.
func Available() (bool, string) {
	if _, _, err := binaries(); err != nil {
		return false, err.Error()
	}
	return true, ""
}
