package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/statusgate/statusgate/internal/fixture"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.9, 1.1, 1.0, 0.8, 1.2}, 1.0},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	in := []float64{3, 1, 2}
	Median(in)
	if in[0] != 3 {
		t.Error("median sorted its argument in place")
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{50: 50, 99: 99, 100: 100, 1: 1, 99.5: 100, 0.1: 1} {
		if got := Percentile(ds, p); got != want {
			t.Errorf("p%v of 1..100 = %v, want %v", p, got, want)
		}
	}
	if got := Percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("p99 of one sample = %v", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of none = %v", got)
	}
	// 1000 samples: p99 is the 990th.
	ds = ds[:0]
	for i := 1; i <= 1000; i++ {
		ds = append(ds, time.Duration(i))
	}
	if got := Percentile(ds, 99); got != 990 {
		t.Errorf("p99 of 1..1000 = %v, want 990", got)
	}
}

func TestBuildReuse(t *testing.T) {
	repo := t.TempDir()
	write := func(rel string, age time.Duration) {
		p := repo + "/" + rel
		os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755)
		os.WriteFile(p, []byte("x"), 0o600)
		when := time.Now().Add(-age)
		os.Chtimes(p, when, when)
	}
	write("go.mod", 3*time.Hour)
	write("caddymodule/a.go", 2*time.Hour)
	write("caddymodule/a_test.go", time.Minute) // tests are not part of the binary
	write("test/perf/main.go", time.Minute)     // nor is the harness
	write(".git/x.go", time.Minute)
	write("bin/caddy", time.Hour)
	newest, which, err := NewestSource(repo)
	if err != nil || which != "caddymodule/a.go" || time.Since(newest) < 2*time.Hour-time.Minute {
		t.Fatalf("NewestSource = %v %q %v", newest, which, err)
	}
	msg, err := Build(repo, repo+"/bin/caddy", false)
	if err != nil || !strings.HasPrefix(msg, "reused") {
		t.Errorf("Build = %q, %v; want the binary reused", msg, err)
	}
}

// TestListeningTCP counts what a reload leaves: two sockets on one port
// (SO_REUSEPORT, as Caddy listens), then one when the old closes.
func TestListeningTCP(t *testing.T) {
	if _, known := ListeningTCP(); !known {
		t.Skip("no /proc/net/tcp here")
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	old, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	port := uint(old.Addr().(*net.TCPAddr).Port)
	cur, err := lc.Listen(context.Background(), "tcp", old.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if byPort, _ := ListeningTCP(); byPort[port] != 2 {
		t.Errorf("two listeners on port %d: counted %d", port, byPort[port])
	}
	old.Close()
	if byPort, _ := ListeningTCP(); byPort[port] != 1 {
		t.Errorf("one listener left on port %d: counted %d", port, byPort[port])
	}
}

// TestStopWithin: a process that exits on SIGTERM is stopped without a
// kill; one that ignores SIGTERM is killed once the wait is over, and says
// so.
func TestStopWithin(t *testing.T) {
	run := func(script string) *Process {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Its first line says its signal handling is in place.
		if line, err := io.ReadAll(io.LimitReader(out, int64(len("ready\n")))); err != nil || string(line) != "ready\n" {
			t.Fatalf("%q: %q %v", script, line, err)
		}
		p := &Process{Cmd: cmd, exited: make(chan struct{})}
		go func() { cmd.Wait(); close(p.exited) }()
		return p
	}
	graceful := run("echo ready; while :; do sleep 0.05; done")
	if killed := graceful.StopWithin(fixture.Patience); killed {
		t.Error("a process that exits on SIGTERM was killed")
	}
	deaf := run("trap '' TERM; echo ready; while :; do sleep 0.05; done")
	if killed := deaf.StopWithin(100 * time.Millisecond); !killed {
		t.Error("a process that ignores SIGTERM was not killed, or StopWithin did not say so")
	}
	if deaf.Cmd.ProcessState == nil || deaf.Cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process that ignores SIGTERM ended with %v, want SIGKILL", deaf.Cmd.ProcessState)
	}
}

// TestReadAtPace reads a body of several pieces whole, pausing after each,
// and returns what it read with the error that cut it short.
func TestReadAtPace(t *testing.T) {
	body := bytes.Repeat([]byte("p"), 3*PieceSize+5)
	start := time.Now()
	got, err := ReadAtPace(bytes.NewReader(body), 10*time.Millisecond)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%d of %d bytes, %v", len(got), len(body), err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("four pieces with a pause of 10ms after each of the first three took %v", took)
	}
	cut := errors.New("cut")
	got, err = ReadAtPace(io.MultiReader(bytes.NewReader(body[:PieceSize+1]), iotest.ErrReader(cut)), 0)
	if !errors.Is(err, cut) || len(got) != PieceSize+1 {
		t.Errorf("cut short: %d bytes, %v", len(got), err)
	}
}
