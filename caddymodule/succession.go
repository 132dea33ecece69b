package caddymodule

// This file is what ends a handler's config: the moment a newer config takes
// over (a reload) or the process stops, the handler's live streams end and,
// on a reload, the handler refuses what still reaches it (docs/live.md, "On
// reload"). Caddy cleans a config's modules up only after its servers have
// stopped, and a server stops only after shutdown_delay (when a listener
// closes) and after its handlers have returned: so Cleanup alone let the old
// policy serve for the whole delay on a listener both configs share, and let
// a stream hold a graceful stop until its stream_lifetime.

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// errSuperseded is why a request that reached a config a newer one has
// replaced is refused.
var errSuperseded = errors.New("the config has been replaced")

// watchSuccession ends a handler's part in its config load when the load
// stops (stopping: its superseded switch, its live streams):
// Caddy emits the load's "stopping" event as the first step of stopping it,
// after a new config is the active one (a reload) or when the process stops,
// before shutdown_delay and before its servers wait for their handlers.
// The event is the load's own, so this does not depend on the order in
// which handlers, apps or loads are provisioned. Outside a server (a unit
// test) there is no load to watch.
func watchSuccession(ctx caddy.Context, s stopping) error {
	if _, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); !ok {
		return nil
	}
	app, err := ctx.App("events")
	if err != nil {
		return err
	}
	return app.(*caddyevents.App).On("stopping", s)
}

// stopping is a handler's handler of its load's "stopping" event: what it
// turns on to refuse, and the live streams it ends.
type stopping struct {
	superseded *atomic.Bool
	live       *liveState
}

// Handle ends the handler's streams, so that their clients reconnect to
// the config that replaces this one (or to another gateway, when the
// process stops), and, unless the process is stopping, makes the handler
// refuse from now on: a request its server still accepts (during
// shutdown_delay, on a listener the new config shares) is the new config's
// to answer. While the process stops, with no config after it, plain
// requests are served until the servers close, as shutdown_delay means.
func (s stopping) Handle(context.Context, caddy.Event) error {
	if !caddy.Exiting() {
		s.superseded.Store(true)
	}
	s.live.end()
	return nil
}

// supersededRefusal answers a request that reached a config a newer one has
// replaced: the 503 of a busy backend, with Retry-After, as a stream that
// reaches a closing config gets; the client's next request reaches the new
// config.
func supersededRefusal() guard.Verdict { return guard.Busy(errSuperseded, "1") }
