package schedlock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/namedlock/mysql/internal/sqlident"
)

// A Provider takes and releases job locks in one ShedLock table on behalf of
// one instance (one locked_by value). It is safe for concurrent use by
// multiple goroutines. It holds no connection of its own: every statement is
// a single auto-committed statement on the given *sql.DB.
type Provider struct {
	db            *sql.DB
	table         string // as given, for messages
	lockedBy      string
	unlockTimeout time.Duration
	lockTimeout   time.Duration
	stmt          statements

	// known holds the job names whose row this Provider has seen, so the
	// INSERT is skipped for them (as ShedLock does). A name whose row was
	// deleted falls back to the INSERT.
	known sync.Map

	// turn is held (a value in a channel of capacity 1) for the span of
	// one acquisition: one at a time per Provider (see acquire).
	turn chan struct{}
}

// New returns a Provider over db, or an error matching [ErrInvalidConfig]
// if an option is invalid, [ErrInvalidArgument] if db is nil. A nil Option
// is ignored. New does not touch the database; call [Provider.CreateTable]
// once if the table may not exist.
func New(db *sql.DB, opts ...Option) (*Provider, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: New: nil *sql.DB", ErrInvalidArgument)
	}
	s := settings{table: DefaultTable, unlockTimeout: DefaultUnlockTimeout, lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&s); err != nil {
			return nil, err
		}
	}
	if s.lockedBy == "" {
		s.lockedBy = defaultLockedBy()
	}
	return &Provider{
		db:            db,
		table:         s.table,
		lockedBy:      s.lockedBy,
		unlockTimeout: s.unlockTimeout,
		lockTimeout:   s.lockTimeout,
		stmt:          buildStatements(quoteTable(s.table)),
		turn:          make(chan struct{}, 1),
	}, nil
}

// Table returns the lock table's name as configured.
func (p *Provider) Table() string { return p.table }

// LockedBy returns the locked_by value this Provider writes.
func (p *Provider) LockedBy() string { return p.lockedBy }

// CreateTable creates the lock table with ShedLock's schema if it does not
// exist. It is never called implicitly; an existing table is left as it is.
func (p *Provider) CreateTable(ctx context.Context) error {
	if _, err := p.db.ExecContext(ctx, p.stmt.create); err != nil {
		return fmt.Errorf("schedlock: create table %s: %w", p.table, err)
	}
	return nil
}

// quoteTable quotes a table name that WithTable (or DefaultTable) has
// already checked.
func quoteTable(name string) string {
	q, _ := sqlident.Quote(name)
	return q
}

func defaultLockedBy() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := fmt.Sprintf("-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	for utf8.RuneCountInString(host)+len(suffix) > MaxLockedByLength {
		_, size := utf8.DecodeLastRuneInString(host)
		host = host[:len(host)-size]
	}
	return host + suffix
}
