package teamcache

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// newServiceWith is newService on the given store.
func newServiceWith(t *testing.T, store *Store) (*Server, *httptest.Server) {
	t.Helper()
	s, srv, _ := newCountingService(t, store)
	return s, srv
}

// newCountingService is the service on store, behind a listener that
// counts what it read from each connection: a test knows the service
// received what a client sent without waiting for a while.
func newCountingService(t *testing.T, store *Store) (*Server, *httptest.Server, *countingListener) {
	t.Helper()
	s := &Server{
		Store:    store,
		Reviewer: NewKubeReviewer(operatorSet), Reader: operatorReader,
		Audience: DefaultAudience, Log: testr.New(t),
	}
	srv := httptest.NewUnstartedServer(s)
	conns := &countingListener{Listener: srv.Listener, bytes: map[string]*atomic.Int64{}}
	srv.Listener = conns
	srv.Start()
	t.Cleanup(srv.Close)
	return s, srv, conns
}

type countingListener struct {
	net.Listener
	mu    sync.Mutex
	bytes map[string]*atomic.Int64 // by the client's address
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := new(atomic.Int64)
	l.mu.Lock()
	l.bytes[c.RemoteAddr().String()] = n
	l.mu.Unlock()
	return countingConn{Conn: c, n: n}, nil
}

// read is what the service read from the connection of the client at
// addr.
func (l *countingListener) read(addr string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.bytes[addr]; n != nil {
		return n.Load()
	}
	return 0
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// token is the pod's token for the cache.
func (te tenantEnv) token(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(te.client.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// rawUpload is a PUT written by hand, as a hostile client would: the
// head and only the first bytes of the body it announces.
type rawUpload struct {
	conn  net.Conn
	local string
	sent  int64
	rest  []byte
	code  atomic.Int64 // the answer's status; -1 the connection closed
	done  atomic.Bool
}

func startRawUpload(t *testing.T, addr, token string, e testEntry, send int) *rawUpload {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpload{conn: conn, local: conn.LocalAddr().String(), rest: e.body[send:]}
	t.Cleanup(u.close)
	head := fmt.Sprintf("PUT %s%s HTTP/1.1\r\nHost: cache\r\nAuthorization: Bearer %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
		actionsPath, hex.EncodeToString(e.action), token, HeaderOutputID, hex.EncodeToString(e.output), len(e.body))
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			u.code.Store(-1)
		} else {
			u.code.Store(int64(resp.StatusCode))
			_ = resp.Body.Close()
		}
		u.done.Store(true)
	}()
	msg := append([]byte(head), e.body[:send]...)
	if _, err := conn.Write(msg); err != nil {
		t.Fatalf("writing an upload: %v", err)
	}
	u.sent = int64(len(msg))
	return u
}

// answer is the status the service answered (0: it closed the
// connection), and whether it did.
func (u *rawUpload) answer() (int, bool) {
	if !u.done.Load() {
		return 0, false
	}
	return max(int(u.code.Load()), 0), true
}

// trickle sends the rest of the body a byte every 100 ms, until the
// connection fails.
func (u *rawUpload) trickle() {
	go func() {
		for _, b := range u.rest {
			if _, err := u.conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

func (u *rawUpload) close() { _ = u.conn.Close() }
