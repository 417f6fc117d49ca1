package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	dsnparse "github.com/namedlock/mysql/internal/dsn"
	"github.com/namedlock/mysql/namedlock/holders"
)

// runHolders is `namedlock holders`.
func runHolders(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("holders", stderr)
	var c common
	c.register(fs)
	kill := fs.Bool("kill", false, "end the session of each key's holder: shows what it would kill, and kills only with -yes")
	yes := fs.Bool("yes", false, "with -kill: really end those sessions")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: namedlock holders -dsn DSN [-kill [-yes]] KEY...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "namedlock holders: no key")
		fs.Usage()
		return exitUsage
	}
	if *yes && !*kill {
		fmt.Fprintln(stderr, "namedlock holders: -yes confirms -kill, and -kill was not given")
		return exitUsage
	}
	s, status := c.open(ctx, stderr)
	if s == nil {
		return status
	}
	defer s.close()
	hs, err := holders.Lookup(s.ctx, s.db, fs.Args()...)
	if err != nil {
		return s.fail(stderr, exitServer, err)
	}
	printHolders(stdout, hs, true)
	if !*kill {
		return exitOK
	}
	return killHolders(s, hs, *yes, stdout)
}

// killHolders is -kill: it names the sessions that hold one of the keys and,
// with yes, ends them; it returns the exit status.
func killHolders(s *server, hs []holders.Holder, yes bool, stdout io.Writer) int {
	var targets []holders.Holder
	for _, h := range hs {
		if h.Held && h.ConnectionID != 0 {
			targets = append(targets, h)
		}
	}
	if len(targets) == 0 {
		fmt.Fprintln(stdout, "\nnothing to kill: no key is held (or the server does not say by whom: on TiDB the holding application learns its session from its Locker's observer, namedlock.Event.Session)")
		return exitNotDone
	}
	fmt.Fprintln(stdout)
	if !yes {
		for _, h := range targets {
			fmt.Fprintf(stdout, "would kill connection %d (%s), holder of %s\n", h.ConnectionID, who(h), h.Name)
		}
		fmt.Fprintln(stdout, "nothing killed: run again with -kill -yes to end these sessions (and every lock each of them holds)")
		return exitNotDone
	}
	status := exitOK
	for _, h := range targets {
		if err := holders.Kill(s.ctx, s.db, h); err != nil {
			fmt.Fprintf(stdout, "not killed: connection %d (%s): %s\n", h.ConnectionID, who(h), dsnparse.Redact(err.Error(), s.passwd))
			status = exitNotDone
			if !errors.Is(err, holders.ErrHolderChanged) {
				status = exitServer
			}
			continue
		}
		fmt.Fprintf(stdout, "killed connection %d (%s), holder of %s\n", h.ConnectionID, who(h), h.Name)
	}
	return status
}

// who is the holder's user@host, or "session not visible".
func who(h holders.Holder) string {
	if h.Session == nil {
		return "session not visible"
	}
	return h.Session.User + "@" + h.Session.Host
}
