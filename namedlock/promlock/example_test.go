package promlock_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/promlock"
	"github.com/namedlock/mysql/pool"
)

// exampleDSN is the server the example runs against: $MYSQL_TEST_DSN, or
// the local test server.
func exampleDSN() string {
	if dsn := os.Getenv("MYSQL_TEST_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

func ExampleNew() {
	lockDB, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer lockDB.Close()

	metrics, err := promlock.New(promlock.WithKeyPrefix(keyfmt.Prefix))
	if err != nil {
		log.Fatal(err)
	}
	locker, err := namedlock.New(lockDB, namedlock.WithObserver(metrics.Observe))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	metrics.Watch(locker)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	key := keyfmt.Key("report", "example-"+strconv.Itoa(os.Getpid()))
	if err := locker.Do(context.Background(), key, func(context.Context) error { return nil }); err != nil {
		log.Fatal(err)
	}

	// What a scrape shows (some of it).
	fams, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	var text bytes.Buffer
	for _, f := range fams {
		_ = expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain)).Encode(f)
	}
	for line := range strings.Lines(text.String()) {
		if strings.HasPrefix(line, "namedlock_acquisitions_total") || strings.HasPrefix(line, "namedlock_hold_seconds_count") {
			fmt.Print(line)
		}
	}
	// Output:
	// namedlock_acquisitions_total{outcome="handoff"} 0
	// namedlock_acquisitions_total{outcome="not_acquired"} 0
	// namedlock_acquisitions_total{outcome="server"} 1
	// namedlock_hold_seconds_count{outcome="released",prefix="report"} 1
}
