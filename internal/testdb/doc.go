// Package testdb finds the MySQL-compatible server that tests run against and
// gives tests unique names and plain pools on it.
//
// Get looks once per test binary, in this order: the DSN in $MYSQL_TEST_DSN
// (only that one, when set); a server answering on 127.0.0.1:3306 as
// root@tcp(127.0.0.1:3306)/test; a mysql:8.4 container started through
// github.com/ory/dockertest/v3 when a Docker engine answers (port 3306 on
// 127.0.0.1 only, removed at the end); and last the in-process go-mysql-server
// of package internal/embedded. When $CI is non-empty the embedded fallback
// is forbidden: without a real server Get fails the test, saying what it
// tried. Get logs "server: <Name>" to every test that calls it, e.g.
//
//	server: MariaDB 10.11.19 at 127.0.0.1:3306 (from 127.0.0.1:3306 probe)
//	server: go-mysql-server 8.0.31 at 127.0.0.1:40215 (embedded fallback)
//
// A container or embedded server that Get starts lives for the whole test
// binary, so a package whose tests call Get stops it from TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// (or calls Stop itself after m.Run, before a final goleak.Find).
//
// A server's Flavor is what flavor.Detect (package internal/flavor) answers:
// from SELECT VERSION() ("MariaDB" in it: flavor.MariaDB) and
// @@version_comment ("Dolt": go-mysql-server, flavor.Embedded, wherever it
// runs), else flavor.MySQL (or flavor.TiDB).
//
// The embedded server lacks what only a real server does (see package
// internal/embedded: whole-second GET_LOCK timeouts, waits that ignore
// disconnects and KILL, no wait_timeout); tests of those behaviours call
// RequireReal, which skips them on it.
//
// Tests share the server, so each one names its locks with UniqueName, which
// is unique per call, per test binary and per process.
//
// HolderOf names the session that holds a lock, for a test to KILL. TiDB's
// IS_USED_LOCK names none (it answers 1 for a held lock): there HolderOf
// answers what RecordHolder was told, which the tests' Lockers tell it from
// their observers (the Session of each Acquired event;
// namedlock.RecordHolders in namedlock's tests). RecordsHolders says
// whether HolderOf reads that record on the test server.
package testdb
