package pool_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/testdb"
	"github.com/namedlock/mysql/pool"
)

// TestReviewR3OpenConfigBeforeConnectPasswordMessage: OpenConfig is meant
// for a BeforeConnect callback that sets a fresh password (an IAM token) on
// each connection, with cfg.Passwd left empty. When the server refuses that
// token, the error says "the DSN gives no password": there is no DSN, and
// a password was given (by the callback) and refused. An operator is sent
// to look for a missing password instead of an expired or wrong token.
func TestReviewR3OpenConfigBeforeConnectPasswordMessage(t *testing.T) {
	cfg := testConfig(t)
	cfg.Passwd = ""
	var calls atomic.Int32
	if err := cfg.Apply(mysql.BeforeConnect(func(_ context.Context, c *mysql.Config) error {
		calls.Add(1)
		c.Passwd = "expired-iam-token"
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := pool.OpenConfig(ctx, cfg)
	if err == nil {
		_ = db.Close()
		t.Skip("the server accepted the login (user without a password check)")
	}
	t.Logf("%d BeforeConnect calls: %v", calls.Load(), err)
	if !errors.Is(err, pool.ErrRefused) {
		t.Fatalf("want ErrRefused: %v", err)
	}
	if calls.Load() > 0 && strings.Contains(err.Error(), "gives no password") {
		t.Errorf("BeforeConnect supplied a password that the server refused, but the error says %q", err)
	}
}

// TestReviewR3OpenConfigUnknownTLSName: a Config naming a TLS config that
// was never registered (a typo in cfg.TLSConfig) is refused with a message
// about the DSN format, though there is no DSN, and without saying that
// the TLS config name is unknown.
func TestReviewR3OpenConfigUnknownTLSName(t *testing.T) {
	cfg := testConfig(t)
	cfg.TLSConfig = "corp-tls-typo"
	cfg.TLS = nil
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := pool.OpenConfig(ctx, cfg)
	if err == nil {
		_ = db.Close()
		t.Fatal("OpenConfig accepted an unknown TLS config name")
	}
	t.Logf("%v", err)
	if !strings.Contains(strings.ToLower(err.Error()), "tls") {
		t.Errorf("the error does not say the TLS config name is unknown: %q", err)
	}
}

// TestReviewR3LeaseOverflow: WithLease accepts any lease of at least 2 s;
// a very long one ("never expire": math.MaxInt64) overflows in the
// rounding up to whole seconds, and the session wait_timeout becomes 1
// second, while the pool (lockconn's Lease, which a Locker reads) reports
// the long lease: every lock whose session idles over a second is lost,
// and New's keep-alive check passes. It must either be refused
// (ErrInvalidOption) or give a wait_timeout of at least 2 s.
func TestReviewR3LeaseOverflow(t *testing.T) {
	db, err := pool.Open(testdb.Get(t).DSN, pool.WithLease(math.MaxInt64))
	if err != nil {
		if errors.Is(err, pool.ErrInvalidOption) {
			return
		}
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	var got int64
	if err := db.QueryRow("SELECT @@session.wait_timeout").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got < 2 {
		t.Errorf("WithLease(%v) accepted; @@session.wait_timeout = %d", time.Duration(math.MaxInt64), got)
	}
}
