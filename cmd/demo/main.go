// Command demo shows in about ten seconds what this module is for: several
// instances of a shop sell the last units of a product, first without a lock
// (they oversell and lose updates), then under a named lock (exact).
//
//	go run ./cmd/demo                                     # embedded server, nothing to install
//	go run ./cmd/demo -dsn 'root@tcp(127.0.0.1:3306)/test' # your MySQL or MariaDB
//	go run ./cmd/demo -procs 3                            # 3 instances, one per OS process
//
// A table products(id, stock) holds one product with -stock units, and a
// table orders gets one row per accepted order. -instances application
// instances, each with its own primary pool (sqlx), its own lock pool
// (pool.Open) and its own namedlock.Locker, as separate deployments of a
// service would have, place -orders orders between them, -workers at a time
// each. An order reads the stock, thinks for -think (a payment call, say),
// and if the stock it read was positive writes it back decremented and
// records the order. The data is reset before each round:
//
//  1. no lock: concurrent orders read the same stock and overwrite each
//     other's decrements: more orders are accepted than there were units
//     (oversold), and the stock column misses decrements (lost updates);
//  2. namedlock.Do with the key keyfmt.Key(prefix+"product", id): exact;
//  3. namedlock.DoTx: exact, the order's transaction committed before the
//     lock is released;
//  4. a scheduled job: three instances fire the same job on the same ticks,
//     each a little late. Without a lock it runs once per instance per tick;
//     with schedlock.Run (a ShedLock-compatible lease row, in database time,
//     with lockAtLeastFor half the 1 s period) once per tick, as long as
//     every firing returns within that half second of its tick's start: a
//     firing slower than that (a machine too busy) can make a tick run
//     twice or not at all, which the round reports as such, not as the
//     lock's failure.
//
// Lost updates are computed as accepted orders − (initial stock − final
// stock); oversold units as accepted orders − initial stock when positive.
//
// The first build takes minutes, not seconds: it compiles go-mysql-server,
// the embedded server below, and its dependencies. Built with -tags
// noembedded the demo leaves it out and needs -dsn.
//
// With no -dsn (and no MYSQL_DSN) the demo starts go-mysql-server in this
// process, on a free port of 127.0.0.1 only, with an in-memory database. That
// server has limits (whole-second GET_LOCK timeouts, waits that ignore
// cancellation, case-sensitive names) which the demo stays inside: lock
// waits have no deadline. It also does not support concurrent writers: a
// commit writes back its own copy of every table it touched, undoing commits
// made meanwhile. Round 1 shows it (the orders table misses acknowledged
// rows, which the demo reports); the locked rounds are unaffected, since the
// lock serializes every write. A lease table cannot work on it, so round 4
// is skipped there unless -rounds names it.
//
// With -procs K the instances of rounds 1 to 3 run in K child processes of
// this binary (K instances, one per process, unless -instances says
// otherwise), which reach the server, embedded or not, through its TCP
// address, so the exclusion shown is between OS processes. The children are
// this same program, told by an environment variable to take commands as
// JSON lines on stdin and to answer as JSON lines on stdout. Round 4 runs its
// three instances in this process.
//
// The tables and the lock key are named with -table-prefix
// (namedlock_demo_products, namedlock_demo_orders, namedlock_demo_shedlock
// and the key namedlock_demo_product:1 by default) so that a real database's
// own tables are never touched; the tables are dropped at the end.
//
// Exit status: 0 when every locked round was exact; 1 when a locked round
// oversold, lost an update or had an order fail; 2 for bad flags; 3 when the
// server cannot be reached or used (the message names the address, never
// the password); 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses.
const (
	exitOK          = 0
	exitWrong       = 1
	exitUsage       = 2
	exitServer      = 3
	exitInterrupted = 130
)

func main() {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(childMain(spec, os.Stdin, os.Stdout))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed command line.
type options struct {
	dsn       string
	procs     int
	rounds    []Mode
	roundsSet bool // -rounds was given
	cfg       Config
}

// parseFlags parses the command line into options, with $MYSQL_DSN when
// -dsn is empty; it returns flag.ErrHelp for -h.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{cfg: DefaultConfig}
	fs, rounds := o.flagSet(stderr)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.dsn == "" {
		o.dsn = os.Getenv("MYSQL_DSN")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	err := o.settle(fs, *rounds, stderr)
	return o, err
}

// flagSet returns the demo's flags, which parse into o, and the -rounds
// flag's value.
func (o *options) flagSet(stderr io.Writer) (fs *flag.FlagSet, rounds *string) {
	fs = flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The default is not shown by -h: it could hold a password.
	fs.StringVar(&o.dsn, "dsn", "",
		"server to run against, go-sql-driver format, e.g. 'user:pass@tcp(127.0.0.1:3306)/test'; default $MYSQL_DSN;\n"+
			"if both are empty, an embedded go-mysql-server is started on a free port of 127.0.0.1")
	fs.IntVar(&o.cfg.Instances, "instances", o.cfg.Instances, "application instances, each with its own primary pool, lock pool and Locker")
	fs.IntVar(&o.cfg.Workers, "workers", o.cfg.Workers, "concurrent orders per instance")
	fs.IntVar(&o.cfg.Orders, "orders", o.cfg.Orders, "orders per round, spread over the instances")
	fs.IntVar(&o.cfg.Stock, "stock", o.cfg.Stock, "initial stock of the product")
	fs.DurationVar(&o.cfg.Think, "think", o.cfg.Think, "pause between reading the stock and writing it back")
	fs.IntVar(&o.procs, "procs", 0, "run the instances in `K` child processes of this program (0: all in this process);\n"+
		"without -instances, K instances, one per process")
	rounds = fs.String("rounds", "nolock,do,dotx,sched",
		"rounds to run, comma-separated: nolock, do, dotx, sched (a scheduled job on 3 instances, without and with\n"+
			"schedlock; skipped on the embedded server, whose tables lose concurrent writes, unless named here)")
	fs.StringVar(&o.cfg.Prefix, "table-prefix", o.cfg.Prefix, "prefix of the demo's table names and lock key (a-z, 0-9, _)")
	fs.Usage = func() { usage(fs) }
	return fs, rounds
}

// usage prints -h: what the demo does, its flags and its exit statuses.
func usage(fs *flag.FlagSet) {
	fmt.Fprint(fs.Output(), `Usage: demo [flags]

Sells the last units of a product from several application instances at
once: without a lock (oversold, lost updates), then with namedlock.Do and
namedlock.DoTx (exact), and prints one table; on a real server, also runs a
scheduled job on 3 instances without and with schedlock. Runs for about
10 s with the defaults.

The first "go run ./cmd/demo" compiles for minutes before the demo starts:
it builds the embedded server (go-mysql-server, with its SQL parser and a
WebAssembly regex engine) that runs when -dsn is not given; later runs start
at once. With -dsn, "go run -tags noembedded ./cmd/demo -dsn ..." builds
without the embedded server.

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprint(fs.Output(), `
Exit status: 0 every locked round exact; 1 a locked round oversold, lost an
update or had failed orders; 2 bad flags; 3 the server cannot be reached or
used; 130 interrupted.
`)
}

// settle completes o once fs has parsed: the rounds, whether -rounds was
// given, -procs against -instances (saying on stderr when -procs raises
// it), and the Config's checks.
func (o *options) settle(fs *flag.FlagSet, rounds string, stderr io.Writer) error {
	instancesSet := false
	fs.Visit(func(f *flag.Flag) {
		o.roundsSet = o.roundsSet || f.Name == "rounds"
		instancesSet = instancesSet || f.Name == "instances"
	})
	var err error
	if o.rounds, err = parseModes(rounds); err != nil {
		return err
	}
	if o.procs < 0 {
		return fmt.Errorf("-procs %d: must not be negative", o.procs)
	}
	if o.procs > 0 && !instancesSet {
		o.cfg.Instances = o.procs // one instance per process, as deployments have
	}
	if o.procs > o.cfg.Instances {
		fmt.Fprintf(stderr, "-procs %d is more than -instances %d: running %d instances, one per process\n", o.procs, o.cfg.Instances, o.procs)
		o.cfg.Instances = o.procs
	}
	return o.cfg.validate()
}

// run is the demo's command line; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	t, err := connect(ctx, o.dsn, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitServer
	}
	defer func() {
		if err := t.close(); err != nil {
			fmt.Fprintf(stderr, "demo: stop the embedded server: %v\n", err)
		}
	}()
	status, err := play(ctx, t, o, stdout, isTerminal(os.Stdout))
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		if ctx.Err() != nil {
			return exitInterrupted
		}
	}
	return status
}
