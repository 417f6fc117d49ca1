package namedlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
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

// exampleID keeps the examples' keys apart from those of another test
// process running the same examples on the same server.
var exampleID = strconv.Itoa(os.Getpid())

func ExampleNew() {
	// The lock pool is dedicated to locks: never the application's pool.
	db, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	locker, err := namedlock.New(db, namedlock.WithKeepAlive(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = locker.Do(context.Background(), keyfmt.Key("product", 42), func(ctx context.Context) error {
		fmt.Println("only one instance runs this at a time")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// only one instance runs this at a time
	// err: <nil>
}

func ExampleLocker_Do() {
	db, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	locker, err := namedlock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// Wait at most 5 s for the lock. fn's ctx is cancelled if the lock is
	// lost while fn runs; fn's error comes back as is.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errOutOfStock := errors.New("out of stock")
	err = locker.Do(ctx, "stock/"+exampleID+"/42", func(ctx context.Context) error {
		return errOutOfStock
	})
	fmt.Println(errors.Is(err, errOutOfStock))
	// Output:
	// true
}

func ExampleLocker_TryDo() {
	db, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// Two Lockers stand for two instances of a service (each would have
	// its own pool).
	a, err := namedlock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	b, err := namedlock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	defer b.Close()

	ctx := context.Background()
	key := "jobs/" + exampleID + "/nightly-report"
	held, err := a.Acquire(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	// A held key is not an error: TryDo says fn did not run.
	ran, err := b.TryDo(ctx, key, func(ctx context.Context) error {
		fmt.Println("not printed: the key is held")
		return nil
	})
	fmt.Println("while held:", ran, err)

	_ = held.Release(ctx)
	ran, err = b.TryDo(ctx, key, func(ctx context.Context) error {
		fmt.Println("report runs")
		return nil
	})
	fmt.Println("after release:", ran, err)
	// Output:
	// while held: false <nil>
	// report runs
	// after release: true <nil>
}

func ExampleLocker_Acquire() {
	db, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	a, err := namedlock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	b, err := namedlock.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	defer b.Close()

	key := "invoice/" + exampleID + "/2024-03"
	lock, err := a.Acquire(context.Background(), key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", lock.Err() == nil)

	// Another instance gives up after 300 ms: the error matches both
	// ErrNotAcquired and the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(ctx, key)
	fmt.Println(errors.Is(err, namedlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))

	fmt.Println("release:", lock.Release(context.Background()))
	<-lock.Done()
	fmt.Println("again:", errors.Is(lock.Release(context.Background()), namedlock.ErrNotHeld))
	// Output:
	// held: true
	// true true
	// release: <nil>
	// again: true
}

func ExampleLocker_DoTx() {
	lockDB, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer lockDB.Close()
	// The application's primary pool: the transaction runs here.
	primary, err := sqlx.Open("mysql", exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer primary.Close()
	table := "namedlock_example_stock_" + exampleID
	ctx := context.Background()
	if _, err := primary.ExecContext(ctx, "CREATE TABLE "+table+" (id INT PRIMARY KEY, qty INT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	defer primary.ExecContext(ctx, "DROP TABLE "+table)
	if _, err := primary.ExecContext(ctx, "INSERT INTO "+table+" VALUES (42, 3)"); err != nil {
		log.Fatal(err)
	}

	locker, err := namedlock.New(lockDB)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	decrement := func(ctx context.Context, tx *sql.Tx) error {
		var qty int
		if err := tx.QueryRowContext(ctx, "SELECT qty FROM "+table+" WHERE id = ?", 42).Scan(&qty); err != nil {
			return err
		}
		if qty == 0 {
			return errors.New("out of stock")
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET qty = ? WHERE id = ?", qty-1, 42)
		return err
	}
	// Committed before the lock is released: the next holder sees it.
	for range 4 {
		err := locker.DoTx(ctx, "product/"+exampleID+"/42", primary.DB, nil, decrement)
		fmt.Println(err)
	}
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// out of stock
}

// ExampleLocker_DoTx_serializable sells from one hot product with 8
// goroutines, each in a DoTx at SERIALIZABLE: on MySQL and MariaDB each
// DoTx begins its transaction while it waits, and gets the lock as soon as
// the previous holder's fn returns; its plain SELECT then waits inside the
// server for that holder's COMMIT, as a SELECT … FOR UPDATE would. (It
// prints "left: 20" there; it has no Output line because TiDB, where the
// tests also run, refuses SERIALIZABLE.)
func ExampleLocker_DoTx_serializable() {
	lockDB, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer lockDB.Close()
	primary, err := sqlx.Open("mysql", exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer primary.Close()
	table := "namedlock_example_hot_" + exampleID
	ctx := context.Background()
	if _, err := primary.ExecContext(ctx, "CREATE TABLE "+table+" (id INT PRIMARY KEY, qty INT NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	defer primary.ExecContext(ctx, "DROP TABLE "+table)
	if _, err := primary.ExecContext(ctx, "INSERT INTO "+table+" VALUES (42, 100)"); err != nil {
		log.Fatal(err)
	}

	locker, err := namedlock.New(lockDB, namedlock.WithSerializableHandoff())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	serializable := &sql.TxOptions{Isolation: sql.LevelSerializable}
	sell := func(ctx context.Context, tx *sql.Tx) error {
		var qty int // read through tx: this read waits for the previous holder's COMMIT
		if err := tx.QueryRowContext(ctx, "SELECT qty FROM "+table+" WHERE id = ?", 42).Scan(&qty); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET qty = ? WHERE id = ?", qty-1, 42)
		return err
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				if err := locker.DoTx(ctx, "product/"+exampleID+"/hot", primary.DB, serializable, sell); err != nil {
					log.Print(err)
				}
			}
		})
	}
	wg.Wait()
	var left int
	if err := primary.GetContext(ctx, &left, "SELECT qty FROM "+table+" WHERE id = 42"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left)
}

// ExampleWithFencing decrements a stock in a fenced DoTx: the transaction's
// first statement mints the holder's token and locks the key's fence row
// until the commit, so no other fenced DoTx on the key can interleave with
// it, even one whose named lock was lost and granted elsewhere meanwhile.
func ExampleWithFencing() {
	ctx := context.Background()
	appDB, err := sqlx.Open("mysql", exampleDSN()) // the application's pool
	if err != nil {
		log.Fatal(err)
	}
	defer appDB.Close()
	fenceTable := "example_fence_" + exampleID
	// Once, explicitly, as for a migration: fencing never creates it.
	if err := namedlock.CreateFenceTable(ctx, appDB.DB, fenceTable); err != nil {
		log.Fatal(err)
	}
	defer appDB.Exec("DROP TABLE " + fenceTable)
	products := "example_products_" + exampleID
	appDB.MustExec("CREATE TABLE " + products + " (id INT PRIMARY KEY, stock INT NOT NULL)")
	defer appDB.Exec("DROP TABLE " + products)
	appDB.MustExec("INSERT INTO " + products + " VALUES (42, 10)")

	lockDB, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer lockDB.Close()
	locker, err := namedlock.New(lockDB, namedlock.WithFencing(appDB.DB, fenceTable))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = locker.DoTx(ctx, keyfmt.Key(products, 42), appDB.DB, nil, func(ctx context.Context, tx *sql.Tx) error {
		token, _ := namedlock.TokenFromContext(ctx, keyfmt.Key(products, 42))
		fmt.Println("token:", token)
		var stock int
		if err := tx.QueryRowContext(ctx, "SELECT stock FROM "+products+" WHERE id = 42").Scan(&stock); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+products+" SET stock = ? WHERE id = 42", stock-1)
		return err
	})
	fmt.Println("committed:", err == nil)
	// Output:
	// token: 1
	// committed: true
}

// ExampleCheckFenced shows a fenced write outside DoTx: the protected row
// carries the last token that wrote it, and a write with an older token —
// from a holder whose lock was lost and taken by someone who wrote since —
// changes nothing and reports ErrStaleToken.
func ExampleCheckFenced() {
	ctx := context.Background()
	appDB, err := sqlx.Open("mysql", exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer appDB.Close()
	files := "example_files_" + exampleID
	appDB.MustExec("CREATE TABLE " + files + " (id INT PRIMARY KEY, body TEXT, fence BIGINT UNSIGNED NOT NULL DEFAULT 0)")
	defer appDB.Exec("DROP TABLE " + files)
	appDB.MustExec("INSERT INTO " + files + " (id) VALUES (7)")

	write := func(token uint64, body string) error {
		return namedlock.CheckFenced(appDB.ExecContext(ctx,
			"UPDATE "+files+" SET body = ?, fence = ? WHERE id = 7 AND fence < ?", body, token, token))
	}
	fmt.Println(write(258, "written by the current holder"))
	fmt.Println(errors.Is(write(1, "late write by a holder that lost its lock"), namedlock.ErrStaleToken))
	// Output:
	// <nil>
	// true
}
