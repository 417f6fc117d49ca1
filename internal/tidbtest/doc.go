// Package tidbtest starts private, throw-away TiDB servers for tests that
// need one configured their own way (a short performance.max-txn-ttl, say),
// from the tidb-server binary that scripts/tidb.sh builds once into its
// cache ($NAMEDLOCK_TIDB_CACHE, default /root/.cache/namedlock-tidb as root,
// ~/.cache/namedlock-tidb otherwise). It never builds: without the binary,
// Start skips the test and says how to build it (scripts/tidb.sh build, a
// long compile, once).
//
// A server is TiDB's in-memory store (unistore, one process) on free ports
// of 127.0.0.1, root without a password, database test, ready when Start returns;
// it is stopped at the end of the test (and killed by the kernel if the
// test binary dies first).
package tidbtest
