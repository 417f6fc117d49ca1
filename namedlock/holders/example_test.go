package holders_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"strconv"

	_ "github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock/holders"
)

// exampleDSN is the server the example runs against: $MYSQL_TEST_DSN, or
// the local test server.
func exampleDSN() string {
	if dsn := os.Getenv("MYSQL_TEST_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// ExampleLookup asks who holds two keys while another session holds one.
func ExampleLookup() {
	ctx := context.Background()
	db, err := sql.Open("mysql", exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// Another program holds the nightly report's lock.
	key := keyfmt.Key("report", "nightly-"+strconv.Itoa(os.Getpid()))
	other, err := db.Conn(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	var got sql.NullInt64
	if err := other.QueryRowContext(ctx, "SELECT GET_LOCK(?, 5)", keyfmt.Portable(key)).Scan(&got); err != nil || got.Int64 != 1 {
		log.Fatal("GET_LOCK: ", got, err)
	}

	hs, err := holders.Lookup(ctx, db, key, "report:weekly-never-held")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hs {
		fmt.Printf("%s: held %v\n", h.Name[:6], h.Held)
	}
	// Where the server names the holder (MySQL, MariaDB; not TiDB), h.ConnectionID
	// is the other program's session and h.Session describes it; TestLookup
	// checks that on every server.

	// Output:
	// report: held true
	// report: held false
}
