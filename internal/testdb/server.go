package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
)

// Server describes the server tests run against. Get returns one Server
// shared by the whole test binary: treat it as read-only.
type Server struct {
	// DSN is a go-sql-driver/mysql DSN for it, as found (no parameters are
	// added; OpenDB adds interpolateParams=true).
	DSN string
	// Name says what it is, where, and how it was found, for test output:
	// "MariaDB 10.11.19 at 127.0.0.1:3306 (from 127.0.0.1:3306 probe)".
	Name string
	// Flavor is its kind, as flavor.Of classifies it: flavor.MariaDB if
	// SELECT VERSION() contains "MariaDB", flavor.Embedded for
	// go-mysql-server (@@version_comment "Dolt"), and so on.
	Flavor flavor.Flavor
	// Version is what SELECT VERSION() returned, e.g.
	// "10.11.19-MariaDB-0+deb12u1" or "8.4.3".
	Version string

	why string // for the embedded server: why no real one was used
}

// Real reports whether s is a real server (MySQL, MariaDB, ...), not the
// embedded go-mysql-server.
func (s *Server) Real() bool { return s.Flavor != flavor.Embedded }

// shortVersion is the leading "N.N.N" of a VERSION() string.
func shortVersion(version string) string {
	end := strings.IndexFunc(version, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end <= 0 {
		return version
	}
	return version[:end]
}

// describe fills in Flavor, Version and Name from what probe found, the
// DSN's address and how the server was found.
func describe(s *Server, id identity, from string) *Server {
	s.Version = id.version
	if s.Flavor == flavor.Unknown {
		s.Flavor = id.flavor
	}
	if s.Flavor == flavor.Embedded && s.why == "" {
		s.why = "the server (" + from + ") is go-mysql-server"
	}
	version := id.version
	addr := "?"
	if cfg, err := mysql.ParseDSN(s.DSN); err == nil {
		addr = cfg.Addr
	}
	s.Name = fmt.Sprintf("%s %s at %s (%s)", s.Flavor, shortVersion(version), addr, from)
	return s
}

// identity is what a server says it is.
type identity struct {
	version string        // SELECT VERSION()
	flavor  flavor.Flavor // flavor.Of(VERSION(), @@version_comment)
}

// probe connects to dsn and asks what it is, within about timeout.
func probe(dsn string, timeout time.Duration) (identity, error) {
	var id identity
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return id, fmt.Errorf("parse DSN: %w", err)
	}
	if cfg.Timeout == 0 || cfg.Timeout > timeout {
		cfg.Timeout = timeout // dial timeout
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return id, err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id.flavor, id.version, err = flavor.Detect(ctx, db)
	return id, err
}
