//go:build !noembedded

package main

import "github.com/namedlock/mysql/internal/embedded"

// startEmbeddedServer starts the embedded go-mysql-server. It is the demo's
// largest dependency by far (most of the first build's time): build with
// -tags noembedded to leave it out when you always give -dsn.
func startEmbeddedServer() (embeddedServer, error) {
	s, err := embedded.Start()
	if err != nil {
		return nil, err
	}
	return s, nil
}
