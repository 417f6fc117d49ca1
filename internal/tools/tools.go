//go:build tools

// Package tools pins modules that only tests, helpers and commands use, so that
// `go mod tidy` keeps them while their importers are being written.
package tools

import (
	_ "github.com/Shopify/toxiproxy/v2"
	_ "github.com/dolthub/go-mysql-server"
	_ "github.com/dolthub/go-mysql-server/memory"
	_ "github.com/dolthub/go-mysql-server/server"
	_ "github.com/go-co-op/gocron/v2"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/ory/dockertest/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/rs/zerolog"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
)
