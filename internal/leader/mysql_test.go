package leader_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/falconhq/falcon/internal/leader"
	"github.com/falconhq/falcon/internal/testenv/dbtest"
)

// takeoverBound is the promise: a standby leads within 15 s of the
// leader's death.
const takeoverBound = 15 * time.Second

func lockName(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "falcon-test-" + hex.EncodeToString(b[:])
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newMySQL(t *testing.T, db *sql.DB, lock string) *leader.MySQL {
	t.Helper()
	e, err := leader.NewMySQL(db, lock)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestMySQLFailover: two replicas, one leads; a graceful stop hands over;
// a leader whose connection the server kills loses, and the standby leads,
// never both at once.
func TestMySQLFailover(t *testing.T) {
	dsn := dbtest.MySQLDSN(t) // skipped without MariaDB, failed under CI=true
	admin := openDB(t, dsn)
	lock := lockName(t)
	ref := newReferee(t)
	a := ref.campaign("a", newMySQL(t, openDB(t, dsn), lock))
	b := ref.campaign("b", newMySQL(t, openDB(t, dsn), lock))
	l1, _ := first(t, takeoverBound, a, b)

	// Graceful: the leader's Run releases the lock once lead returns.
	stopped := time.Now()
	l1.stop()
	if cause := ended(t, l1, 5*time.Second); cause != nil {
		t.Fatalf("%s's lead ended with cause %v on a graceful stop, want none", l1.name, cause)
	}
	l2, at := first(t, takeoverBound, other(l1, a, b))
	graceful := at.Sub(stopped)
	if graceful >= leader.DefaultTiming.LeaseDuration+leader.DefaultTiming.RenewDeadline {
		t.Errorf("graceful handover took %s: the lock was not released", graceful)
	}

	// Killed: the server drops the leader's connection, freeing its lock.
	c := ref.campaign("c", newMySQL(t, openDB(t, dsn), lock))
	var holder int64
	if err := admin.QueryRow("SELECT IS_USED_LOCK(?)", lock).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if _, err := admin.Exec("KILL ?", holder); err != nil {
		t.Fatal(err)
	}
	if cause := ended(t, l2, leader.DefaultTiming.RenewDeadline+time.Second); !errors.Is(cause, leader.ErrLost) {
		t.Fatalf("%s's lead ended with cause %v after its connection was killed, want ErrLost", l2.name, cause)
	}
	_, at = first(t, takeoverBound, c)
	takeover := at.Sub(killed)
	t.Logf("mysql election: graceful handover %s, takeover after the leader's connection was killed %s", graceful.Round(time.Millisecond), takeover.Round(time.Millisecond))
}

// TestMySQLVanishedLeader: a leader that goes silent without closing its
// connection (its machine died, the network split) loses its lock when the
// server drops the connection after LeaseDuration; it stops leading before
// that, and the standby leads within the bound.
func TestMySQLVanishedLeader(t *testing.T) {
	dsn := dbtest.MySQLDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, cfg.Addr)
	viaProxy := cfg.Clone()
	viaProxy.Addr = p.addr
	lock := lockName(t)
	ref := newReferee(t)
	a := ref.campaign("a", newMySQL(t, openDB(t, viaProxy.FormatDSN()), lock))
	first(t, takeoverBound, a)
	b := ref.campaign("b", newMySQL(t, openDB(t, dsn), lock))

	vanished := time.Now()
	p.freeze()
	if cause := ended(t, a, leader.DefaultTiming.RenewDeadline+time.Second); !errors.Is(cause, leader.ErrLost) {
		t.Fatalf("a's lead ended with cause %v once it went silent, want ErrLost", cause)
	}
	lost := time.Since(vanished)
	_, at := first(t, takeoverBound, b)
	takeover := at.Sub(vanished)
	t.Logf("mysql election: a silent leader stepped down after %s; the standby led %s after it went silent", lost.Round(time.Millisecond), takeover.Round(time.Millisecond))
	if takeover < leader.DefaultTiming.LeaseDuration {
		t.Errorf("the standby led %s after the leader went silent, before the server could have dropped it (%s)", takeover, leader.DefaultTiming.LeaseDuration)
	}
}

// proxy forwards TCP to MySQL until frozen; then it forwards nothing and
// closes nothing, like a machine that vanished: the server hears neither
// data nor a FIN.
type proxy struct {
	addr   string
	frozen atomic.Bool
	hold   chan struct{} // closed at cleanup: frozen copies may end
}

func startProxy(t *testing.T, upstream string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), hold: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); close(p.hold); wg.Wait() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(up, down) }()
			go func() { defer wg.Done(); p.pipe(down, up) }()
		}
	}()
	return p
}

func (p *proxy) freeze() { p.frozen.Store(true) }

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.frozen.Load() {
			<-p.hold
			dst.Close()
			src.Close()
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil { // EOF or a closed side: pass the close on
			dst.Close()
			src.Close()
			return
		}
	}
}
