//go:build noembedded

package main

import "errors"

// startEmbeddedServer fails: this binary was built with -tags noembedded, without
// the embedded go-mysql-server.
func startEmbeddedServer() (embeddedServer, error) {
	return nil, errors.New("built with -tags noembedded, so there is no embedded server: give -dsn (or $MYSQL_DSN)")
}
