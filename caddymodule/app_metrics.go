package caddymodule

// This file is the config load's metrics, registered once in the load's
// registry, beside Caddy's own series: the gateway's families
// (internal/metrics), which every handler of the load counts into, and the
// game's metrics (internal/gamemetrics), into which each handler adds its
// game servers (Handler.exportGame).

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statusgate/statusgate/caddymodule/internal/gamemetrics"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// collectors are the load's families of the gateway's metrics, registered
// in reg, the load's registry, by the first handler that asks (nil: its
// own, registered nowhere, as in a handler's test without a registry).
func (a *App) collectors(reg *prometheus.Registry) (*metrics.Collectors, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.metrics != nil || reg == nil {
		return a.metrics, nil
	}
	c, err := metrics.Register(reg)
	if err != nil {
		return nil, err
	}
	a.metrics = c
	return c, nil
}

// gameCollector is the load's game metrics collector, registered in reg,
// the load's registry, by the first handler that asks (nil: counted, not
// exported); nil when the config switches them off.
func (a *App) gameCollector(reg *prometheus.Registry) (*gamemetrics.Collector, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.GameMetrics != nil && a.GameMetrics.Off {
		return nil, nil
	}
	if a.games != nil {
		return a.games, nil
	}
	var o gamemetrics.Options
	if a.GameMetrics != nil {
		o = gamemetrics.Options{MaxWorlds: a.GameMetrics.MaxWorlds, EntityTypes: a.GameMetrics.EntityTypes}
	}
	c := gamemetrics.New(o)
	if reg != nil {
		if err := reg.Register(c); err != nil {
			c.Close()
			return nil, fmt.Errorf("registering the game metrics: %v", err)
		}
	}
	a.games = c
	return c, nil
}

// closeGames ends the game metrics' trips with the load.
func (a *App) closeGames() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.games != nil {
		a.games.Close()
	}
}
