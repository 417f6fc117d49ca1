package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/sirupsen/logrus"
)

// DatabaseName is the name of the in-memory database every Server has.
const DatabaseName = "test"

// CloseTimeout bounds how long Close waits for the server's connection
// goroutines after it has closed their sockets. A goroutine still running then
// is stuck in a statement that ignores disconnects (a GET_LOCK wait).
const CloseTimeout = 10 * time.Second

// ErrBusy is returned (wrapped) by Close when connection goroutines did not end
// within CloseTimeout.
var ErrBusy = errors.New("embedded: connection goroutines still running after close")

// closeTimeout is CloseTimeout, shortened by tests.
var closeTimeout = CloseTimeout

var quietOnce sync.Once

// Server is one go-mysql-server listening on 127.0.0.1. Its methods are safe
// for concurrent use by multiple goroutines.
type Server struct {
	engine   *sqle.Engine
	srv      *server.Server
	ln       *trackingListener
	accepted chan struct{} // closed when the accept loop has returned

	closeOnce sync.Once
	closeErr  error
}

// Start starts a server with an empty in-memory database named DatabaseName,
// listening on a free port of 127.0.0.1 only, that accepts user root (any user)
// without a password. Call Close to stop it.
//
// The first call lowers the level of logrus' standard logger, which
// go-mysql-server logs every connection and every failed query to, to errors.
func Start() (*Server, error) {
	quietOnce.Do(func() {
		if logrus.GetLevel() > logrus.ErrorLevel {
			logrus.SetLevel(logrus.ErrorLevel)
		}
	})

	nl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("embedded: listen: %w", err)
	}
	ln := newTrackingListener(nl)

	db := memory.NewDatabase(DatabaseName)
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	pro := memory.NewDBProvider(db)
	engine := sqle.NewDefault(pro)

	cfg := server.Config{
		Protocol: "tcp",
		Address:  nl.Addr().String(),
		Listener: ln,
	}
	srv, err := server.NewServer(cfg, engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil)
	if err != nil {
		_ = nl.Close()
		_ = engine.Close()
		return nil, fmt.Errorf("embedded: new server: %w", err)
	}

	s := &Server{engine: engine, srv: srv, ln: ln, accepted: make(chan struct{})}
	go func() {
		defer close(s.accepted)
		_ = srv.Start() // returns once the listener is closed
	}()
	return s, nil
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// DSN returns a go-sql-driver/mysql DSN for user root and database
// DatabaseName: "root@tcp(127.0.0.1:PORT)/test".
func (s *Server) DSN() string { return "root@tcp(" + s.Addr() + ")/" + DatabaseName }

// Close stops accepting connections, closes every open connection and waits
// (at most CloseTimeout) for the goroutines serving them. It is idempotent:
// later calls return the first call's result. A non-nil error wrapping ErrBusy
// means some connection goroutines were stuck, typically in a GET_LOCK wait,
// which go-mysql-server does not interrupt; they end when that wait ends.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	err := s.srv.Close() // closes the listener; the accept loop returns
	<-s.accepted
	s.ln.closeConns()
	if n := s.ln.wait(closeTimeout); n > 0 {
		err = errors.Join(err, fmt.Errorf("%w: %d after %v", ErrBusy, n, closeTimeout))
	}
	if cerr := s.engine.Close(); !errors.Is(cerr, context.Canceled) {
		// Engine.Close reports the context it cancelled to stop its
		// background threads: that is success.
		err = errors.Join(err, cerr)
	}
	return err
}
