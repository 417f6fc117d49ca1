// Command namedlock tells an operator who holds named locks on a MySQL or
// MariaDB server, and can end a holder's session.
//
//	namedlock holders -dsn DSN KEY...          who holds each key's lock
//	namedlock holders -dsn DSN -kill KEY...    show the sessions it would kill, kill nothing
//	namedlock holders -dsn DSN -kill -yes KEY... end those sessions
//	namedlock list -dsn DSN [-prefix P]        every user-level lock held, where the server can tell
//
// holders maps each key to its server name exactly as a namedlock.Locker
// does (keyfmt.Portable, which leaves a server name as it is, so a name
// copied from list or the process list works as a key) and prints whether
// it is held, the holder's
// connection id as IS_USED_LOCK answers it, and from
// information_schema.PROCESSLIST its user, host, command, state, time in
// that state and the statement it runs. list reads MySQL 8's
// performance_schema.metadata_locks, or MariaDB's
// information_schema.METADATA_LOCK_INFO when the metadata_lock_info plugin
// is loaded; otherwise it says how to load it (INSTALL SONAME
// 'metadata_lock_info'). -prefix filters server names. See package
// namedlock/holders.
//
// The command only reads, unless -kill and -yes are both given: -kill alone
// prints what would be killed and exits 1. With -yes each holder is checked
// again (IS_USED_LOCK must still answer the same connection) right before
// its KILL CONNECTION; the server then frees every lock of that session, and
// the Locker that held one reports ErrLockLost to its caller.
//
// The DSN is go-sql-driver/mysql's (user:password@tcp(host:3306)/db); it can
// also come from $NAMEDLOCK_DSN, which keeps the password out of the process
// list. The command never prints the DSN or the password.
//
// Exit status: 0 done; 1 -kill without -yes, a holder not killed, or list
// not possible on this server; 2 bad usage; 3 the server could not be
// reached or queried.
package main
