package rig

import (
	"net"
	"testing"
)

// ClosedPort returns an address nothing listens on.
func ClosedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
