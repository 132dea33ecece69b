//go:build linux

package caddymodule

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestKeySourceReadOnce checks that a key file is read once where the
// Caddyfile is adapted and once where the config loads: what the key is
// checked with (the source's problem, the text's shape) is what it then
// is, and its revision is of that text, even if the file is being
// rewritten meanwhile.
func TestKeySourceReadOnce(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // the revision key's folder
	file := filepath.Join(t.TempDir(), "bot.key")
	if err := os.WriteFile(file, []byte(testKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opens := watchOpens(t, file)
	h := new(Handler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("statusgate {\n\tkey bot {file." + file + "}\n}")); err != nil {
		t.Fatal(err)
	}
	if n := opens(); n != 1 {
		t.Errorf("the Caddyfile adapter opened the key file %d times, want once", n)
	}
	if h.Auth.Keys[0].Revision == "" {
		t.Error("no revision")
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	defer h.Cleanup()
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if n := opens(); n != 1 {
		t.Errorf("the config load opened the key file %d times, want once", n)
	}
}

// watchOpens counts the opens of the file at path, by anyone: it returns the
// number of those since it last returned (since watchOpens, the first time).
// The kernel queues an open's event as the file opens, so an open done
// before the call is always counted.
func watchOpens(t *testing.T, path string) func() int {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	// The closes are watched too: the kernel folds an event into the one
	// before it when they are alike (two opens in a row would count as
	// one), and a close stands between two opens.
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN|syscall.IN_CLOSE); err != nil {
		t.Fatal(err)
	}
	return func() int {
		t.Helper()
		n := 0
		buf := make([]byte, 64*syscall.SizeofInotifyEvent)
		for {
			r, err := syscall.Read(fd, buf)
			if errors.Is(err, syscall.EAGAIN) {
				return n
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= r; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&syscall.IN_OPEN != 0 {
					n++
				}
				off += syscall.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}
