package progress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// stalledConn dials addr with a small receive buffer and sends a GET for
// path, then reads nothing.
func stalledConn(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: fixture.SmallRcvBuf}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	return conn
}

// bodyServer serves body through a Writer with timeout and reports each
// response's write error on ended.
func bodyServer(body []byte, timeout time.Duration, ended chan<- error) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := New(rw, timeout)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, err := w.Write(body)
		if err == nil {
			err = w.Done()
		}
		ended <- err
	}))
}

// TestStalledClientIsCutOff writes a large body to a client that reads
// nothing: the write fails within about the timeout instead of blocking, and
// a client that reads gets the whole body meanwhile.
func TestStalledClientIsCutOff(t *testing.T) {
	body := []byte(strings.Repeat("x", 8<<20))
	ended := make(chan error, 4)
	srv := bodyServer(body, 300*time.Millisecond, ended)
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	start := time.Now()
	stalledConn(t, addr, "/")
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || n != int64(len(body)) {
		t.Fatalf("the reading client got %d bytes, %v", n, err)
	}
	errs := []error{<-ended, <-ended}
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("write errors %v: want exactly the stalled client's", errs)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the stalled write took %v to fail", d)
	}
}

// TestSlowClientIsServed reads slowly but steadily, a piece at a time within
// the timeout: it gets the whole body.
func TestSlowClientIsServed(t *testing.T) {
	body := []byte(strings.Repeat("y", 256<<10))
	ended := make(chan error, 1)
	srv := bodyServer(body, 400*time.Millisecond, ended)
	defer srv.Close()
	conn := stalledConn(t, srv.Listener.Addr().String(), "/")
	br := bufio.NewReaderSize(conn, 1024)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8<<10)
	got := 0
	for {
		n, err := res.Body.Read(buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // 8 KiB per 20 ms: slow, not stalled
	}
	if got != len(body) {
		t.Fatalf("slow client got %d of %d bytes", got, len(body))
	}
	if err := <-ended; err != nil {
		t.Fatalf("slow client's write failed: %v", err)
	}
}

// TestKeepAliveAfterDeadline checks that a kept-alive connection's next
// response, after an idle time longer than the timeout, is not cut by the
// deadline the previous one left: Done relies on net/http to lift it.
func TestKeepAliveAfterDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := New(rw, 100*time.Millisecond)
		_, _ = w.Write([]byte("hello"))
		_ = w.Done()
	}))
	defer srv.Close()
	c := srv.Client()
	for i := range 2 {
		res, err := c.Get(srv.URL)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || string(b) != "hello" {
			t.Fatalf("request %d: %q %v", i, b, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestNoDeadlineSupport writes to a writer that cannot take deadlines.
func TestNoDeadlineSupport(t *testing.T) {
	rec := httptest.NewRecorder()
	w := New(rec, time.Second)
	if _, err := w.Write(make([]byte, 3*pieceSize+1)); err != nil {
		t.Fatal(err)
	}
	if err := w.Done(); err != nil || rec.Body.Len() != 3*pieceSize+1 {
		t.Fatalf("%v, %d bytes", err, rec.Body.Len())
	}
}

// pieces is a Watcher that counts the pieces taken.
type pieces struct{ n atomic.Int32 }

func (p *pieces) Took() { p.n.Add(1) }

// TestWatcher checks that the Watcher is told of every piece written, with
// a timeout and without one, and of nothing after Watch(nil).
func TestWatcher(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Second} {
		rec := httptest.NewRecorder()
		w := New(rec, timeout)
		var p pieces
		w.Watch(&p)
		if _, err := w.Write(make([]byte, 3*pieceSize+1)); err != nil {
			t.Fatal(err)
		}
		if p.n.Load() != 4 {
			t.Errorf("timeout %v: told of %d pieces, want 4", timeout, p.n.Load())
		}
		w.Watch(nil)
		_, _ = w.Write(make([]byte, pieceSize))
		if p.n.Load() != 4 || rec.Body.Len() != 4*pieceSize+1 {
			t.Errorf("timeout %v: after Watch(nil): told of %d pieces, %d bytes written", timeout, p.n.Load(), rec.Body.Len())
		}
	}
}

// TestWatcherOfStalledClient: a client that reads nothing takes no more
// pieces once its connection's buffers are full, until it is cut off.
func TestWatcherOfStalledClient(t *testing.T) {
	body := []byte(strings.Repeat("z", 32<<20))
	var p pieces
	ended := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := New(rw, 300*time.Millisecond)
		w.Watch(&p)
		_, err := w.Write(body)
		ended <- err
	}))
	defer srv.Close()
	stalledConn(t, srv.Listener.Addr().String(), "/")
	if err := <-ended; err == nil {
		t.Fatal("the write to a stalled client did not fail")
	}
	if n := int(p.n.Load()); n >= len(body)/pieceSize {
		t.Fatalf("a stalled client took %d of %d pieces", n, len(body)/pieceSize)
	}
}
