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
	var otherID int64
	if err := other.QueryRowContext(ctx, "SELECT CONNECTION_ID() FROM (SELECT GET_LOCK(?, 5)) AS l", keyfmt.Portable(key)).Scan(&otherID); err != nil {
		log.Fatal(err)
	}

	hs, err := holders.Lookup(ctx, db, key, "report:weekly-never-held")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hs {
		fmt.Printf("%s: held %v, by the other program %v, its session described %v\n", h.Name[:6], h.Held, h.ConnectionID == otherID, h.Session != nil)
	}
	// On MySQL and MariaDB it prints (TestLookup checks it on every
	// server; TiDB names no holder, so there the holder is not known):
	//
	//	report: held true, by the other program true, its session described true
	//	report: held false, by the other program false, its session described false
}
