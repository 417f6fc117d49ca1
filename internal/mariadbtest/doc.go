// Package mariadbtest starts private, throw-away mariadbd servers for fault
// tests: crashes (Kill9), restarts on the same port and datadir, clean stops,
// and server options such as a short wait_timeout. It never touches the
// machine's shared server.
//
//	s := mariadbtest.Start(t, mariadbtest.WithArgs("--wait-timeout=2"))
//	db, _ := sql.Open("mysql", s.DSN())
//	...
//	s.Kill9(t)   // as a crash: every session and lock is gone
//	s.Restart(t) // same port, same datadir, after crash recovery
//
// Each Server has its own datadir under the test's TempDir, copied from one
// datadir that mariadb-install-db installs once per test binary in
// os.TempDir() (with --no-defaults, --skip-test-db and root authenticated
// normally, without a password);
// RemoveTemplate removes it, and a later binary removes those of binaries that
// are gone. mariadbd runs with --no-defaults, --bind-address=127.0.0.1 on a
// free port, its socket in the datadir, --skip-log-bin,
// --innodb-buffer-pool-size=16M and an 8 MiB redo log (about 40 MB of disk per
// server while it runs); root has no password; database "test" exists. Its
// output goes to mariadbd.err in the datadir, whose last lines are in every
// failure message.
//
// Readiness is a real connection, polled for at most ReadyTimeout. Servers are
// killed in t.Cleanup, and the kernel kills them (Linux parent-death signal)
// if the test binary dies first.
//
// Without the binaries, Start skips the test, or fails it when $CI is set;
// Available tells beforehand.
package mariadbtest
