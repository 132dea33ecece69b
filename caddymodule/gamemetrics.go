package caddymodule

// This file composes the game's metrics (internal/gamemetrics) into the
// gateway: each handler's game servers in its load's collector (its own
// backend, its network's members), each asked through its own guard on the
// gateway's own behalf (docs/observability.md, "The game's metrics").

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/gamemetrics"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// gameHolder names the game metrics as a caller of a guard: the gateway
// itself, which takes no client's place.
const gameHolder = "game metrics"

// exportGame adds the handler's game servers to the load's game metrics:
// its own backend, named by its declared server's name, its guard's name
// or its upstreams as written (the last two give way to a network's name
// for it),
// and its network's members by their ids. backend is the handler's
// declared backend (nil: the form of 1.0, whose trips only a client's
// request can make: it has no game metrics). A name the config gives to
// two backends, or two names it gives to one, stops the config, naming
// both places; two backends it names by the same upstreams as written
// alone (told apart by their proxy blocks) only lose the second's game
// metrics, with a warning: a config that ran before runs on.
func (h *Handler) exportGame(ctx caddy.Context, backend *upstream.Backend) error {
	c, err := h.app.gameCollector(ctx.GetMetricsRegistry())
	if err != nil || c == nil {
		return err
	}
	srv := serverOf(ctx)
	if backend != nil && !backend.Placeholders() {
		s := gamemetrics.Server{Name: backend.String(), Key: guardKey(h.guard), Where: handlerAt(ctx, backend), Trip: h.gameTrip(h.guard, srv)}
		switch {
		case h.Server != "":
			s.Name, s.Explicit = h.Server, true
			s.Where = fmt.Sprintf("server %s (declared once, fronted by %s)", h.Server, s.Where)
		case h.Backend.Guard != "":
			// The pool the backend's counts are kept in, which names it
			// better than its upstreams as written, and like them gives way
			// to the name a network or a declaration gives the server.
			s.Name = h.Backend.Guard
			s.Where = fmt.Sprintf("guard %s of %s", h.Backend.Guard, s.Where)
		}
		if err := c.Add(s); errors.Is(err, gamemetrics.ErrUnnamed) {
			h.logger.Warn(err.Error())
		} else if err != nil {
			return err
		}
	}
	if h.network == nil {
		return nil
	}
	for _, m := range h.network.members {
		if m.own && backend == nil {
			continue // the handler's own, in the form of 1.0
		}
		s := gamemetrics.Server{Name: m.id, Key: guardKey(m.guard), Explicit: true, Trip: h.gameTrip(m.guard, srv),
			Where: fmt.Sprintf("server %s of network %s in %s", m.id, h.network.cluster, handlerAt(ctx, backend))}
		if err := c.Add(s); err != nil {
			return err
		}
		c.AddNetwork(h.network.cluster, m.id)
	}
	return nil
}

// guardKey names the backend behind g for the game metrics: its guard,
// known, as the guard's metrics know it, by its held bytes, which every
// guard has and no two share.
func guardKey(g *guard.Guard) any { return g.Units("", guard.Limits{}).Held }

// gameTrip is the trip of the game metrics to the server behind g: the
// request a network's member trip makes, for any of the five endpoints,
// with the handler's stations (their cache and snapshot times, so that it
// shares the guard's micro-cache entry with the network's trips and every
// other gateway-made request), made of nothing of any client's request,
// on the gateway's own behalf: a whole answer, in the keyed class, taking
// no client's place. srv is the handler's server.
func (h *Handler) gameTrip(g *guard.Guard, srv *caddyhttp.Server) gamemetrics.Trip {
	return func(ctx context.Context, ep gamemetrics.Endpoint) gamemetrics.Answer {
		e := h.table.byName[ep.String()]
		path := "/api/v1/" + ep.String()
		who := guard.Caller{Keyed: true, Authenticated: true, Gateway: true, Holder: gameHolder, Held: hold.Share{Keyed: true}}
		bg, t, stop := gatewayRequest(ctx, g, srv, e, path, who, nil)
		defer stop()
		rec := guard.NewCapture(int(g.Limits().MaxResponse))
		v := guard.Background(h.logger, "fetching a game server's figures", &e.Station, func() guard.Verdict {
			return g.Fetch(progress.New(rec, 0), bg, t)
		})
		switch {
		case v.Refusal():
			return gamemetrics.Answer{Busy: true}
		case rec.Over:
			return gamemetrics.Answer{Err: errMemberTooLarge}
		case v.Status != 0 || v.Cut:
			return gamemetrics.Answer{Err: cmp.Or(v.Cause, guard.ErrBrokeOff)}
		case rec.Status != http.StatusOK:
			return gamemetrics.Answer{Err: fmt.Errorf("the server answered %d", rec.Status)}
		}
		return gamemetrics.Answer{Body: rec.Body, TTL: guard.CacheTime(&e.Station, rec.Body, time.Now())}
	}
}
