package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/statusgate/statusgate/internal/sim"
)

// backend is one round's statusgate_sim, served by the harness from its own
// listener rather than from the gateway's config. The real plugin is its own
// process: a reload of the gateway does not restart it, empty its queue or
// reset its counters, and with the sim in the gateway's config it would do
// all three (a reload provisions a new sim, with a new thread pool and new
// counters, while the old one drains beside it), so the backend's peak
// concurrency across a reload could not be measured.
type backend struct {
	srv    *http.Server
	cancel context.CancelFunc
	port   int
	stats  *sim.Stats
}

// startBackend provisions a sim from simBlock(c) and serves it on a free
// loopback port.
func startBackend(c config) (*backend, error) {
	tokens, err := caddyfile.Tokenize([]byte(simBlock(c)), "flood-sim")
	if err != nil {
		return nil, err
	}
	s := new(sim.Sim)
	if err := s.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
		return nil, err
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	if err := s.Provision(ctx); err != nil {
		cancel()
		return nil, err
	}
	if err := s.Validate(); err != nil {
		cancel()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return nil, err
	}
	b := &backend{cancel: cancel, port: l.Addr().(*net.TCPAddr).Port, stats: sim.Lookup(simName)}
	if b.stats == nil {
		cancel()
		l.Close()
		return nil, fmt.Errorf("the sim did not register as %q", simName)
	}
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = s.ServeHTTP(w, r, nil)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := b.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return b, nil
}

func (b *backend) addr() string { return "127.0.0.1:" + strconv.Itoa(b.port) }

// stop ends the sim and closes its listener and connections, then waits
// (up to a minute) until its queue has drained: after a round of plain
// reverse_proxy under stalled HTTP/2 streams it holds thousands of
// requests, each of which still builds its answer when its turn comes, and
// that work and garbage must not land in the next round.
func (b *backend) stop() {
	b.cancel()
	_ = b.srv.Close()
	deadline := time.Now().Add(time.Minute)
	for b.stats.Snapshot().InFlight > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}
