package caddymodule

// This file is the backend options resolved into the limits a guard puts in
// force (guard.Limits): defaults applied, each checked with its path, and a
// gateway's share of them.

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/internal/ident"
)

// resolveLimits checks c and applies the defaults. Each error names the
// option by its JSON path, and an option that cannot be off says why.
func resolveLimits(c BackendConfig) (guard.Limits, error) {
	var l guard.Limits
	if err := checkNumbers(&c); err != nil {
		return l, err
	}
	if c.QueueWait > 0 && c.QueueLength == off {
		return l, fmt.Errorf("backend.queue_wait: %v, but queue_length is -1 (off): there is no queue to wait in", time.Duration(c.QueueWait))
	}
	if err := guardNameError("backend.guard", c.Guard); c.Guard != "" && err != nil {
		return l, err
	}
	for _, section := range []struct {
		name string
		m    map[string]caddy.Duration
	}{{"cache", c.Cache}, {"snapshot", c.Snapshot}} {
		// In name order, so that of several mistakes the same one is named
		// every time.
		for _, name := range slices.Sorted(maps.Keys(section.m)) {
			d, path := section.m[name], "backend."+section.name+"."+name
			switch {
			case !validEndpointName(name):
				return l, fmt.Errorf("backend.%s: %w", section.name, endpointNameError(name))
			case d == 0:
				// Here 0 cannot mean the default, which leaving the
				// endpoint out says, so it would be a guess at off.
				return l, fmt.Errorf("%s: 0 is not a duration: write a positive one, or -1 for off (off in the Caddyfile); leave %s out for its default", path, name)
			}
			if err := optionDecls[section.name].numberError(path, int64(d)); err != nil {
				return l, err
			}
		}
	}
	if ep, ok := c.cachedWithoutCache(); ok {
		return l, fmt.Errorf("backend.cache.%s: %v, but cache_size is -1 (no micro-cache): write -1 or leave %s out", ep, time.Duration(c.Cache[ep]), ep)
	}
	takeLimits(&l, &c)
	if l.Queue == 0 {
		l.Wait = 0 // no queue to wait in
	}
	if l.MaxResponse > l.MaxHeld {
		return l, fmt.Errorf("backend.max_response: %d (%s) is more than max_held, %d (%s): no answer that large could be held; write max_held %d or more, or a smaller max_response",
			l.MaxResponse, sizeText(l.MaxResponse), l.MaxHeld, sizeText(l.MaxHeld), l.MaxResponse)
	}
	if why := c.instancesTooMany(); why != "" {
		return l, fmt.Errorf("backend.instances: %d %s", c.Instances, why)
	}
	return l.PerInstance(max(1, c.Instances)), nil
}

// guardNameError says why name, the value of the option at path, names no
// guard, or nil: the Caddyfile's rule and the JSON's.
func guardNameError(path, name string) error {
	switch {
	case name == "off":
		return fmt.Errorf("%s cannot be off ('off' is not a guard name): %s", path, whyNotOff["guard"])
	case !ident.Valid(name):
		return fmt.Errorf("%s: '%s' is not a name of letters, digits, '_' and '-'", path, name)
	}
	return nil
}

// logShare says at startup what this gateway, one of several, admits: the
// operator checks there that the shares add up to the backend's capacity,
// and that the main-thread lane is open on one gateway only.
func logShare(logger *zap.Logger, l guard.Limits, t *endpointTable, maxInFlight int) {
	if l.Instances <= 1 {
		return
	}
	lane := "open here: route every gateway's /placeholders to this one, and disable placeholders on the others"
	switch {
	case t.lookup("placeholders") == nil:
		lane = "placeholders disabled here: another gateway owns the main-thread lane"
	case l.MainThread == 0:
		lane = "open here without a limit of its own (max_main_thread off)"
	}
	limit := func(key string, v int) zap.Field {
		if v == 0 {
			return zap.String(key, "off")
		}
		return zap.Int(key, v)
	}
	logger.Info("one of several gateways in front of the backend: this one admits its share",
		zap.Int("instances", l.Instances), limit("max_in_flight", l.InFlight), limit("queue_length", l.Queue), zap.Int64("max_held", l.MaxHeld),
		zap.Int("max_main_thread", l.MainThread), zap.String("main_thread_lane", lane))
	// Each gateway admits at least 1: k gateways above the backend's
	// max_in_flight admit k together.
	if total := offOr(maxInFlight, admission.DefaultLimit); total > 0 && l.Instances > total {
		logger.Warn("instances is more than max_in_flight: each gateway admits at least 1 request at a time, so together the gateways put more requests at once on the backend than max_in_flight; run no more gateways than the backend has slots, or raise max_in_flight if the backend can take it",
			zap.Int("instances", l.Instances), zap.Int("max_in_flight", total), zap.Int("admitted_together", l.Instances*l.InFlight))
	}
}

// resolveGuard is resolveLimits and resolveLive together: c's limits with
// the live streams' bounds in them, and the streams' own options.
func resolveGuard(c BackendConfig) (guard.Limits, liveLimits, error) {
	l, err := resolveLimits(c)
	if err != nil {
		return l, liveLimits{}, err
	}
	lv := resolveLive(c.LiveConfig)
	lv.writeTimeout = c.writeTimeout()
	return l, lv, nil
}
