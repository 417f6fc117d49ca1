package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// demo is the story on one server: the coordinator's own primary pool (to
// set up, reset and inspect the data) and the fleet of instances that place
// the orders.
type demo struct {
	cfg   Config
	db    *sqlx.DB
	t     tables
	fleet fleet
}

// newDemo creates the tables and opens cfg.Instances instances on dsn: in
// this process when procs is 0, else spread over procs child processes of
// this binary. The caller has checked that the server is reachable.
func newDemo(ctx context.Context, dsn string, cfg Config, procs int) (*demo, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	db, err := openPrimary(dsn, 1)
	if err != nil {
		return nil, err
	}
	d := &demo{cfg: cfg, db: db, t: tablesFor(cfg.Prefix)}
	if err := d.t.create(ctx, db); err != nil {
		_ = db.Close()
		return nil, err
	}
	if procs > 0 {
		d.fleet, err = startProcFleet(ctx, dsn, procs, cfg)
	} else {
		d.fleet, err = openLocalFleet(ctx, dsn, 1, cfg.Instances, cfg)
	}
	if err != nil {
		return nil, errors.Join(err, d.dropAndClose())
	}
	return d, nil
}

// round resets the data and runs one round of cfg.Orders orders over all
// instances at once. done counts the orders placed so far, for progress.
func (d *demo) round(ctx context.Context, mode Mode, done *atomic.Int64) (Result, error) {
	if err := d.t.reset(ctx, d.db, d.cfg.Stock); err != nil {
		return Result{}, err
	}
	start := time.Now()
	t, err := d.fleet.run(ctx, mode, split(d.cfg.Orders, d.cfg.Instances), done)
	elapsed := time.Since(start)
	if err != nil {
		return Result{}, err
	}
	r := newResult(mode, d.cfg.Stock, t)
	r.Elapsed = elapsed
	if r.Final, r.Recorded, err = d.t.inspect(ctx, d.db); err != nil {
		return Result{}, err
	}
	return r, nil
}

// close stops the instances and removes the tables (the job lock table too).
func (d *demo) close() error {
	return errors.Join(d.fleet.close(), d.dropAndClose())
}

func (d *demo) dropAndClose() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(d.t.drop(ctx, d.db), d.dropSched(ctx), d.db.Close())
}
