package schedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/schedlock"
)

// exampleDB opens the examples' server: $MYSQL_TEST_DSN or a local MariaDB.
func exampleDB() *sql.DB {
	dsn := os.Getenv("MYSQL_TEST_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test?interpolateParams=true&parseTime=true"
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// Three instances fire the same job at the same tick; one runs it.
func Example() {
	ctx := context.Background()
	db := exampleDB()
	defer db.Close()

	table := fmt.Sprintf("example_shedlock_%d", os.Getpid())
	setup, err := schedlock.New(db, schedlock.WithTable(table))
	if err != nil {
		log.Fatal(err)
	}
	if err := setup.CreateTable(ctx); err != nil { // once, e.g. in a migration
		log.Fatal(err)
	}
	defer db.Exec("DROP TABLE " + table)

	cfg := schedlock.Config{
		Name:           "nightly-report",
		LockAtMostFor:  10 * time.Minute, // a crashed holder blocks the job this long at most
		LockAtLeastFor: 30 * time.Second, // late ticks of other instances are skipped
	}
	for i := range 3 {
		instance, err := schedlock.New(db, schedlock.WithTable(table), schedlock.WithLockedBy(fmt.Sprintf("instance-%d", i)))
		if err != nil {
			log.Fatal(err)
		}
		ran, err := instance.Run(ctx, cfg, func(ctx context.Context) error {
			fmt.Printf("instance-%d generates the report\n", i)
			return nil
		})
		fmt.Printf("instance-%d: ran=%v err=%v\n", i, ran, err)
	}
	// Output:
	// instance-0 generates the report
	// instance-0: ran=true err=<nil>
	// instance-1: ran=false err=<nil>
	// instance-2: ran=false err=<nil>
}

// A long job keeps its lease alive; if another instance takes the row,
// the job's context is cancelled with ErrLeaseLost as its cause.
func ExampleConfig_keepAlive() {
	ctx := context.Background()
	db := exampleDB()
	defer db.Close()

	table := fmt.Sprintf("example_keepalive_%d", os.Getpid())
	p, err := schedlock.New(db, schedlock.WithTable(table))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	defer db.Exec("DROP TABLE " + table)

	cfg := schedlock.Config{
		Name:          "reindex",
		LockAtMostFor: time.Second,
		KeepAlive:     250 * time.Millisecond, // LockAtMostFor/4
	}
	ran, err := p.Run(ctx, cfg, func(ctx context.Context) error {
		select {
		case <-time.After(2 * time.Second): // twice LockAtMostFor
			fmt.Println("reindexed")
			return nil
		case <-ctx.Done():
			return context.Cause(ctx) // errors.Is(err, schedlock.ErrLeaseLost)
		}
	})
	fmt.Println(ran, err)
	// Output:
	// reindexed
	// true <nil>
}

// Lock and Unlock are the lower-level form of Run.
func ExampleProvider_Lock() {
	ctx := context.Background()
	db := exampleDB()
	defer db.Close()

	table := fmt.Sprintf("example_lease_%d", os.Getpid())
	a, err := schedlock.New(db, schedlock.WithTable(table), schedlock.WithLockedBy("a"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := schedlock.New(db, schedlock.WithTable(table), schedlock.WithLockedBy("b"))
	if err != nil {
		log.Fatal(err)
	}
	if err := a.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	defer db.Exec("DROP TABLE " + table)

	cfg := schedlock.Config{Name: "send-invoices", LockAtMostFor: time.Minute}
	lease, err := a.Lock(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.Lock(ctx, cfg)
	fmt.Println(errors.Is(err, schedlock.ErrLocked), err)

	fmt.Println(lease.Unlock(ctx))
	fmt.Println(lease.Unlock(ctx))
	// Output:
	// true schedlock: job is locked by another instance: job "send-invoices" is held by "a"
	// <nil>
	// schedlock: lease already unlocked
}

func ExampleConfig_Validate() {
	cfg := schedlock.Config{
		Name:          strings.Repeat("x", 65),
		LockAtMostFor: time.Minute,
	}
	err := cfg.Validate()
	fmt.Println(errors.Is(err, schedlock.ErrNameTooLong), errors.Is(err, schedlock.ErrInvalidConfig))

	cfg = schedlock.Config{Name: "report", LockAtMostFor: time.Minute, LockAtLeastFor: time.Hour}
	fmt.Println(cfg.Validate())
	// Output:
	// true true
	// schedlock: invalid configuration: job "report": LockAtLeastFor (1h0m0s) must not exceed LockAtMostFor (1m0s)
}
