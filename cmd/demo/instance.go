package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	dsnparse "github.com/namedlock/mysql/internal/dsn"
	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/sqlxlock"
	"github.com/namedlock/mysql/pool"
)

// instance is one simulated application instance, with everything a real one
// would have of its own: a primary pool for business queries (sqlx), a
// dedicated lock pool (pool.Open) and a namedlock.Locker on it.
type instance struct {
	id     int
	cfg    Config
	t      tables
	key    string
	db     *sqlx.DB
	lockDB *sql.DB
	locker *namedlock.Locker

	mu    sync.Mutex
	waits []time.Duration // lock waits of the current round, from the observer
}

// openInstance opens instance id's pools and Locker on dsn.
func openInstance(ctx context.Context, dsn string, id int, cfg Config) (*instance, error) {
	in := &instance{id: id, cfg: cfg, t: tablesFor(cfg.Prefix), key: keyfmt.Key(cfg.Prefix+"product", productID)}
	var err error
	if in.lockDB, err = pool.OpenContext(ctx, dsn); err != nil {
		return nil, err // names the address, never the password
	}
	if in.db, err = openPrimary(dsn, cfg.Workers); err != nil {
		_ = in.lockDB.Close()
		return nil, err
	}
	if in.locker, err = namedlock.New(in.lockDB, namedlock.WithObserver(in.observe)); err != nil {
		_ = in.db.Close()
		_ = in.lockDB.Close()
		return nil, err
	}
	return in, nil
}

// openPrimary opens an application's primary pool: the DSN as given, with
// interpolated parameters (one round trip per statement).
func openPrimary(dsn string, conns int) (*sqlx.DB, error) {
	cfg, err := dsnparse.Parse(dsn)
	if err != nil {
		return nil, errors.New("the DSN cannot be parsed") // pool.Open has already parsed it
	}
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("primary pool for %s: %w", cfg.Addr, err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	db.SetMaxOpenConns(conns + 1)
	db.SetMaxIdleConns(conns + 1)
	return db, nil
}

func (in *instance) observe(e namedlock.Event) {
	if e.Outcome != namedlock.Acquired {
		return
	}
	in.mu.Lock()
	in.waits = append(in.waits, e.Wait)
	in.mu.Unlock()
}

// close closes the Locker first (it releases what it holds), then the pools.
func (in *instance) close() error {
	return errors.Join(in.locker.Close(), in.lockDB.Close(), in.db.Close())
}

// run places orders orders, cfg.Workers at a time, and adds one to done after
// each. It stops early when ctx ends.
func (in *instance) run(ctx context.Context, mode Mode, orders int, done *atomic.Int64) tally {
	in.mu.Lock()
	in.waits = in.waits[:0]
	in.mu.Unlock()

	var next atomic.Int64
	var mu sync.Mutex
	var t tally
	var wg sync.WaitGroup
	for range in.cfg.Workers {
		wg.Go(func() {
			var local tally
			for next.Add(1) <= int64(orders) && ctx.Err() == nil {
				ok, err := in.order(ctx, mode)
				local.record(ok, err)
				done.Add(1)
			}
			mu.Lock()
			t.add(local)
			mu.Unlock()
		})
	}
	wg.Wait()

	in.mu.Lock()
	for _, w := range in.waits {
		t.WaitsUS = append(t.WaitsUS, w.Microseconds())
	}
	in.mu.Unlock()
	return t
}

// order places one order the way mode says: read the stock, think, and if
// it was positive write it back decremented and record the order. It reports
// whether the order was accepted.
func (in *instance) order(ctx context.Context, mode Mode) (accepted bool, err error) {
	switch mode {
	case NoLock:
		return in.buy(ctx, in.db)
	case LockDo:
		err = in.locker.Do(ctx, in.key, func(ctx context.Context) error {
			accepted, err = in.buy(ctx, in.db)
			return err
		})
	case LockDoTx:
		err = sqlxlock.DoTx(ctx, in.locker, in.key, in.db, nil, func(ctx context.Context, tx *sqlx.Tx) error {
			accepted, err = in.buy(ctx, tx)
			return err
		})
	default:
		return false, fmt.Errorf("unknown round %d", mode)
	}
	return accepted && err == nil, err
}

// queryer is what buy needs: the primary pool or a transaction on it.
type queryer interface {
	QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// buy is the read-modify-write that loses updates when two run at once.
func (in *instance) buy(ctx context.Context, q queryer) (bool, error) {
	var stock int
	if err := q.QueryRowxContext(ctx, "SELECT stock FROM "+in.t.products+" WHERE id = ?", productID).Scan(&stock); err != nil {
		return false, fmt.Errorf("read stock: %w", err)
	}
	if stock <= 0 {
		return false, nil
	}
	if err := sleep(ctx, in.cfg.Think); err != nil {
		return false, err
	}
	if _, err := q.ExecContext(ctx, "UPDATE "+in.t.products+" SET stock = ? WHERE id = ?", stock-1, productID); err != nil {
		return false, fmt.Errorf("write stock: %w", err)
	}
	if _, err := q.ExecContext(ctx, "INSERT INTO "+in.t.orders+" (product_id, instance) VALUES (?, ?)", productID, in.id); err != nil {
		return false, fmt.Errorf("record order: %w", err)
	}
	return true, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
