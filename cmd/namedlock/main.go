package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/go-sql-driver/mysql"

	dsnparse "github.com/namedlock/mysql/internal/dsn"
)

// Exit statuses.
const (
	exitOK       = 0
	exitNotDone  = 1
	exitUsage    = 2
	exitServer   = 3
	dsnEnv       = "NAMEDLOCK_DSN"
	usageSummary = `usage:
  namedlock holders -dsn DSN [-kill [-yes]] KEY...
  namedlock list -dsn DSN [-prefix P]
The DSN may also come from $NAMEDLOCK_DSN.`
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command with args (without the program name) and returns
// its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageSummary)
		return exitUsage
	}
	switch args[0] {
	case "holders":
		return runHolders(ctx, args[1:], stdout, stderr)
	case "list":
		return runList(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usageSummary)
		return exitOK
	}
	fmt.Fprintf(stderr, "namedlock: unknown command %q\n%s\n", args[0], usageSummary)
	return exitUsage
}

// common are the flags of every command.
type common struct {
	dsn     string
	timeout time.Duration
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dsn, "dsn", "", "the server, as user:password@tcp(host:3306)/db (default $"+dsnEnv+")")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "bound on the whole command")
}

// newFlagSet returns a flag set that reports to stderr and does not exit.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("namedlock "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// server is an open connection to the server, for one command.
type server struct {
	db     *sql.DB
	ctx    context.Context // bounded by -timeout
	passwd string          // never printed: redacted from every error
	stop   context.CancelFunc
}

// close ends ctx and closes the pool.
func (s *server) close() {
	s.stop()
	_ = s.db.Close()
}

// fail prints err, without the password, and returns status.
func (s *server) fail(stderr io.Writer, status int, err error) int {
	fmt.Fprintf(stderr, "namedlock: %s\n", dsnparse.Redact(err.Error(), s.passwd))
	return status
}

// open connects to the server named by c.dsn (or $NAMEDLOCK_DSN); on
// failure it prints why, never with the DSN or the password, and returns
// the exit status.
func (c *common) open(ctx context.Context, stderr io.Writer) (*server, int) {
	dsn := c.dsn
	if dsn == "" {
		dsn = os.Getenv(dsnEnv)
	}
	if dsn == "" {
		fmt.Fprintf(stderr, "namedlock: no server: give -dsn or set $%s\n", dsnEnv)
		return nil, exitUsage
	}
	// The module's one DSN parser (pool.Open's): its errors never quote
	// the DSN, and it refuses a DSN the driver would split inside the
	// password.
	cfg, err := dsnparse.Parse(dsn)
	if err != nil {
		fmt.Fprintf(stderr, "namedlock: -dsn: %s\n", err)
		return nil, exitUsage
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	cfg.InterpolateParams = true
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "namedlock: -dsn: %s\n", dsnparse.Refused(err))
		return nil, exitUsage
	}
	s := &server{db: sql.OpenDB(connector), passwd: cfg.Passwd}
	s.db.SetMaxOpenConns(2)
	s.ctx, s.stop = context.WithTimeout(ctx, c.timeout)
	if err := s.db.PingContext(s.ctx); err != nil {
		s.close()
		return nil, s.fail(stderr, exitServer, fmt.Errorf("%s as %s: %w", cfg.Addr, cfg.User, err))
	}
	return s, exitOK
}
