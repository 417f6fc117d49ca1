// Package faultproxy puts an in-process TCP proxy (toxiproxy,
// github.com/Shopify/toxiproxy/v2) between a client and a server so that a
// test can break the network between them: a blackhole, latency, connection
// resets, or the proxy going away.
//
//	p := faultproxy.New(t, "127.0.0.1:3306")
//	db, _ := sql.Open("mysql", p.DSN("root@tcp(127.0.0.1:3306)/test"))
//	...
//	p.Blackhole(t) // queries hang until their context ends
//	p.Heal(t)      // new connections work again
//
// The proxy listens on a free port of 127.0.0.1 and is stopped in t.Cleanup.
// Faults apply to open and new connections alike. What each one does to the
// server's view of a session, which is what lock tests care about (checked by
// this package's tests against the test server):
//
//   - Blackhole drops all data both ways but keeps both sockets open: while
//     the client keeps its socket, the server keeps the session and its locks.
//     A client that gives up closes its socket (go-sql-driver/mysql does on a
//     context deadline), and the proxy passes that close on: the server then
//     ends the session. So a host that vanished without FIN or RST (which the
//     server notices only at its wait_timeout) is a blackholed connection
//     that the client leaves open, e.g. an idle lock connection. Heal closes
//     the blackholed connections.
//   - Latency delays the server's replies; removing it (Heal) keeps the
//     connections.
//   - ResetPeer resets a connection as soon as data flows on it; the server
//     ends the session at once.
//   - Disable closes every connection on both sides and refuses new ones
//     until Enable, which listens on the same address again.
//
// Connections that lived through a fault may have lost data: discard them.
package faultproxy
