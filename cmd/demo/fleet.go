package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// fleet is the set of instances a round runs on: goroutines of this process
// ([localFleet]) or child processes ([procFleet]).
type fleet interface {
	// run places orders[i] orders on instance i, adding one to done per
	// order, and returns the instances' combined tally.
	run(ctx context.Context, mode Mode, orders []int, done *atomic.Int64) (tally, error)
	close() error
}

// localFleet runs instances in this process.
type localFleet struct {
	instances []*instance
}

// openLocalFleet opens count instances numbered from first.
func openLocalFleet(ctx context.Context, dsn string, first, count int, cfg Config) (*localFleet, error) {
	f := &localFleet{}
	for i := range count {
		in, err := openInstance(ctx, dsn, first+i, cfg)
		if err != nil {
			return nil, errors.Join(err, f.close())
		}
		f.instances = append(f.instances, in)
	}
	return f, nil
}

func (f *localFleet) run(ctx context.Context, mode Mode, orders []int, done *atomic.Int64) (tally, error) {
	tallies := make([]tally, len(f.instances))
	var wg sync.WaitGroup
	for i, in := range f.instances {
		wg.Go(func() { tallies[i] = in.run(ctx, mode, orders[i], done) })
	}
	wg.Wait()
	var t tally
	for _, x := range tallies {
		t.add(x)
	}
	return t, ctx.Err()
}

func (f *localFleet) close() error {
	errs := make([]error, len(f.instances))
	var wg sync.WaitGroup
	for i, in := range f.instances {
		wg.Go(func() { errs[i] = in.close() })
	}
	wg.Wait()
	f.instances = nil
	return errors.Join(errs...)
}
