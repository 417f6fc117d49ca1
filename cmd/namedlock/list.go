package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/namedlock/mysql/namedlock/holders"
)

// runList is `namedlock list`.
func runList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("list", stderr)
	var c common
	c.register(fs)
	prefix := fs.String("prefix", "", "only locks whose server name begins with `P`")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: namedlock list -dsn DSN [-prefix P]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "namedlock list: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return exitUsage
	}
	s, status := c.open(ctx, stderr)
	if s == nil {
		return status
	}
	defer s.close()
	hs, err := holders.List(s.ctx, s.db, *prefix)
	switch {
	case errors.Is(err, holders.ErrCannotList):
		return s.fail(stderr, exitNotDone, err)
	case err != nil:
		return s.fail(stderr, exitServer, err)
	case len(hs) == 0 && *prefix != "":
		fmt.Fprintf(stdout, "no user-level lock held whose name begins with %q\n", *prefix)
	case len(hs) == 0:
		fmt.Fprintln(stdout, "no user-level lock held")
	default:
		printHolders(stdout, hs, false)
	}
	return exitOK
}
