package pool_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/namedlock/mysql/pool"
)

// exampleDSN is the server the examples run against: $MYSQL_TEST_DSN, or
// the local test server.
func exampleDSN() string {
	if dsn := os.Getenv("MYSQL_TEST_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

func ExampleOpen() {
	// The dedicated lock pool: at most 8 locks held or waited for at once by
	// this process, and a 10 s lease for the locks of a vanished host.
	db, err := pool.Open(exampleDSN(), pool.WithMaxConns(8), pool.WithLease(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	var lease int
	if err := db.QueryRowContext(context.Background(), "SELECT @@session.wait_timeout").Scan(&lease); err != nil {
		log.Fatal(err)
	}
	fmt.Println("max connections:", db.Stats().MaxOpenConnections)
	fmt.Println("session wait_timeout:", lease)
	// Output:
	// max connections: 8
	// session wait_timeout: 10
}

func ExampleOpen_invalidOption() {
	_, err := pool.Open(exampleDSN(), pool.WithMaxConns(0))
	fmt.Println(err)
	// Output:
	// pool: invalid option: WithMaxConns(0): must be at least 1
}

func ExampleOpen_unreachable() {
	// The error names the address and user, never the password.
	_, err := pool.Open("app:s3cret@tcp(127.0.0.1:1)/app")
	fmt.Println(err)
	// Output:
	// pool: tcp 127.0.0.1:1 as "app": cannot reach the server: connect: connection refused
}

func ExampleOpen_urlDSN() {
	// A URL is not the driver's DSN format; the error says which one is.
	_, err := pool.Open("mysql://app:s3cret@db:3306/app")
	fmt.Println(errors.Is(err, pool.ErrInvalidDSN))
	fmt.Println(err)
	// Output:
	// true
	// pool: invalid DSN: a URL (scheme://…) is not accepted; expected the go-sql-driver format user:password@tcp(host:port)/dbname
}
