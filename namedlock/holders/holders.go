package holders

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/namedlock/mysql/internal/flavor"
	"github.com/namedlock/mysql/keyfmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrCannotList: the server cannot list user-level locks (see List); the
	// error says why and, for MariaDB, how to load the plugin that can.
	ErrCannotList = errors.New("holders: the server cannot list user-level locks")
	// ErrHolderChanged: Kill found the lock no longer held by the connection
	// it was asked to kill; nothing was killed.
	ErrHolderChanged = errors.New("holders: the lock is no longer held by that connection")
	// ErrNoKey: Lookup was given no key, or an empty one.
	ErrNoKey = errors.New("holders: no key")
)

// Holder is what the server tells of one named lock.
type Holder struct {
	Key  string // the key asked for; "" from List, where the server gives only names
	Name string // the lock's name on the server: keyfmt.Portable(Key)
	Held bool   // somebody holds it
	// ConnectionID is the holder's connection id, as IS_USED_LOCK answers
	// it (the process list's ID); 0 when not held, or when the server does
	// not tell (TiDB: there the holding application learns it from its
	// Locker's observer, namedlock.Event.Session).
	ConnectionID int64
	// Session describes the holder's session; nil when not held, not told,
	// or not in the process list (the session ended since, or the PROCESS
	// privilege is missing).
	Session *Session
}

// Session is a connection as information_schema.PROCESSLIST shows it.
type Session struct {
	User    string
	Host    string        // host:port of the client; the host by name (localhost) unless skip_name_resolve
	DB      string        // its default database, "" for none
	Command string        // Sleep, Query, Execute (a prepared statement), ...
	State   string        // e.g. "User lock" while waiting for a named lock (MariaDB, MySQL)
	Time    time.Duration // time in its current state (to the millisecond on MariaDB, the second elsewhere)
	Info    string        // the statement it runs, "" when idle
}

// Lookup returns, for each key in order, whether its lock is held and by
// whom. Each key is mapped to its server name as a namedlock.Locker maps it
// ([keyfmt.Portable]).
func Lookup(ctx context.Context, db *sql.DB, keys ...string) ([]Holder, error) {
	if len(keys) == 0 || slices.Contains(keys, "") {
		return nil, ErrNoKey
	}
	fl, _, err := flavor.Detect(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("holders: detect the server: %w", err)
	}
	out := make([]Holder, len(keys))
	var ids []int64
	for i, key := range keys {
		h := Holder{Key: key, Name: keyfmt.Portable(key)}
		var id sql.NullInt64
		if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", h.Name).Scan(&id); err != nil {
			return nil, fmt.Errorf("holders: IS_USED_LOCK(%q): %w", h.Name, err)
		}
		// TiDB answers 1, not the holder's id, for a held lock
		// (flavor.NamesHolder), and NULL for a free one, as the others.
		h.Held = id.Valid && id.Int64 != 0
		if h.Held && fl.NamesHolder() {
			h.ConnectionID = id.Int64
			ids = append(ids, id.Int64)
		}
		out[i] = h
	}
	if err := describe(ctx, db, fl, out, ids); err != nil {
		return nil, err
	}
	return out, nil
}

// List returns every user-level lock held on the server whose name begins
// with prefix ("" for all), sorted by name, where the server can list them
// (see the package documentation); otherwise an error matching
// [ErrCannotList] that says why. Names are server names: a portable key is
// its own name, any other key shows as keyfmt.Portable made it.
func List(ctx context.Context, db *sql.DB, prefix string) ([]Holder, error) {
	fl, version, err := flavor.Detect(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("holders: detect the server: %w", err)
	}
	var query string
	switch fl {
	case flavor.MySQL:
		query = "SELECT m.OBJECT_NAME, t.PROCESSLIST_ID FROM performance_schema.metadata_locks m " +
			"JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID " +
			"WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK' AND m.LOCK_STATUS = 'GRANTED'"
	case flavor.MariaDB:
		query = "SELECT TABLE_SCHEMA, THREAD_ID FROM information_schema.METADATA_LOCK_INFO WHERE LOCK_TYPE = 'User lock'"
	default:
		return nil, fmt.Errorf("%w: %s (%s) has no table of user-level locks; look keys up one by one instead", ErrCannotList, fl, version)
	}
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, cannotList(fl, err)
	}
	defer rows.Close()
	var out []Holder
	var ids []int64
	for rows.Next() {
		var name string
		var id sql.NullInt64
		if err := rows.Scan(&name, &id); err != nil {
			return nil, fmt.Errorf("holders: list user-level locks: %w", err)
		}
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		out = append(out, Holder{Name: name, Held: true, ConnectionID: id.Int64})
		if id.Valid {
			ids = append(ids, id.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, cannotList(fl, err)
	}
	slices.SortFunc(out, func(a, b Holder) int { return cmp.Compare(a.Name, b.Name) })
	if err := describe(ctx, db, fl, out, ids); err != nil {
		return nil, err
	}
	return out, nil
}

// MySQL and MariaDB error numbers of a table or plugin that is missing.
const (
	errNumUnknownTable = 1109 // ER_UNKNOWN_TABLE: information_schema has no such table
	errNumNoSuchTable  = 1146 // ER_NO_SUCH_TABLE
)

// cannotList explains err, the failure of List's query on a server of
// flavor fl: a missing table becomes ErrCannotList and how to get it.
func cannotList(fl flavor.Flavor, err error) error {
	var me *mysql.MySQLError
	missing := errors.As(err, &me) && (me.Number == errNumUnknownTable || me.Number == errNumNoSuchTable)
	switch {
	case missing && fl == flavor.MariaDB:
		return fmt.Errorf("%w: MariaDB lists them in information_schema.METADATA_LOCK_INFO only when the metadata_lock_info plugin is loaded: "+
			"INSTALL SONAME 'metadata_lock_info' (once, as a user with the INSERT privilege on mysql.plugin), "+
			"or plugin_load_add = metadata_lock_info in the server's configuration (%w)", ErrCannotList, err)
	case missing:
		return fmt.Errorf("%w: performance_schema.metadata_locks is not there: is performance_schema off? (%w)", ErrCannotList, err)
	}
	return fmt.Errorf("holders: list user-level locks: %w", err)
}

// describe sets the Session of each holder whose connection is among ids
// and in the process list.
func describe(ctx context.Context, db *sql.DB, fl flavor.Flavor, hs []Holder, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	timeCol := "TIME * 1000"
	if fl == flavor.MariaDB {
		timeCol = "TIME_MS"
	}
	in := make([]string, len(ids))
	for i, id := range ids {
		in[i] = strconv.FormatInt(id, 10)
	}
	rows, err := db.QueryContext(ctx, "SELECT ID, USER, HOST, DB, COMMAND, "+timeCol+", STATE, INFO "+
		"FROM information_schema.PROCESSLIST WHERE ID IN ("+strings.Join(in, ", ")+")")
	if err != nil {
		return fmt.Errorf("holders: read the process list: %w", err)
	}
	defer rows.Close()
	sessions := map[int64]*Session{}
	for rows.Next() {
		var id int64
		var ms float64
		var db, state, info sql.NullString
		s := &Session{}
		if err := rows.Scan(&id, &s.User, &s.Host, &db, &s.Command, &ms, &state, &info); err != nil {
			return fmt.Errorf("holders: read the process list: %w", err)
		}
		s.DB, s.State, s.Info = db.String, state.String, info.String
		s.Time = time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond)
		sessions[id] = s
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("holders: read the process list: %w", err)
	}
	for i := range hs {
		if hs[i].ConnectionID != 0 {
			hs[i].Session = sessions[hs[i].ConnectionID]
		}
	}
	return nil
}

// Kill ends the session of h's holder (KILL CONNECTION), after checking
// that h.ConnectionID still holds the lock named h.Name: when it does not
// (released since, or held by another connection now) nothing is killed and
// the error matches [ErrHolderChanged]. The server frees every lock of the
// killed session. (A holder that lets go between the check and the KILL
// still loses its session: the check narrows that window, it cannot close
// it.)
func Kill(ctx context.Context, db *sql.DB, h Holder) error {
	if h.ConnectionID == 0 {
		return fmt.Errorf("%w: %q: no connection id to kill", ErrHolderChanged, h.Name)
	}
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", h.Name).Scan(&id); err != nil {
		return fmt.Errorf("holders: IS_USED_LOCK(%q): %w", h.Name, err)
	}
	switch {
	case !id.Valid:
		return fmt.Errorf("%w: %q is not held now (was by %d)", ErrHolderChanged, h.Name, h.ConnectionID)
	case id.Int64 != h.ConnectionID:
		return fmt.Errorf("%w: %q is held by %d now, not %d", ErrHolderChanged, h.Name, id.Int64, h.ConnectionID)
	}
	if _, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(h.ConnectionID, 10)); err != nil {
		return fmt.Errorf("holders: KILL CONNECTION %d: %w", h.ConnectionID, err)
	}
	return nil
}
