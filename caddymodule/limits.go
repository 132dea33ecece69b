package caddymodule

// This file is the backend options resolved into the limits a guard puts in
// force (guard.Limits): defaults applied, each checked with its path, the
// server's limits told from the front door's, and a gateway's share of them.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/admission"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/microcache"
)

// resolveLimits checks c and applies the defaults. Each error names the
// option by its JSON path, and an option that cannot be off says why.
func resolveLimits(c BackendConfig) (guard.Limits, error) {
	var l guard.Limits
	for _, n := range []struct {
		name string
		v    int
	}{{"max_in_flight", c.MaxInFlight}, {"max_main_thread", c.MaxMainThread}, {"max_per_client", c.MaxPerClient}, {"queue_length", c.QueueLength}} {
		if n.v < off {
			return l, fmt.Errorf("backend.%s: %d is not a limit: write a whole number of at least 1, or -1 for off (leave it out for the default)", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{{"timeout", c.Timeout}, {"write_timeout", c.WriteTimeout}} {
		if d.v < off {
			return l, fmt.Errorf("backend.%s: %v is negative: write a positive duration, or -1 for off (leave it out for the default)", d.name, time.Duration(d.v))
		}
	}
	switch {
	case c.QueueWait == off:
		return l, fmt.Errorf("backend.queue_wait cannot be off (-1): %s; to refuse at once when the backend is busy, set queue_length to -1", whyNotOff["queue_wait"])
	case c.QueueWait < 0:
		return l, fmt.Errorf("backend.queue_wait: %v is negative: write a positive duration (leave it out for the default)", time.Duration(c.QueueWait))
	case c.QueueWait > 0 && c.QueueLength == off:
		return l, fmt.Errorf("backend.queue_wait: %v, but queue_length is -1 (off): there is no queue to wait in", time.Duration(c.QueueWait))
	}
	if c.CacheSize < off {
		return l, fmt.Errorf("backend.cache_size: %d is not a size: write bytes, at least 1, or -1 for off (leave it out for the default)", c.CacheSize)
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"max_response", c.MaxResponse}, {"max_held", c.MaxHeld}} {
		if n.v == off {
			return l, fmt.Errorf("backend.%s cannot be off (-1): %s", n.name, whyNotOff[n.name])
		}
		if n.v < 0 {
			return l, fmt.Errorf("backend.%s: %d is not a size: write bytes, at least 1 (leave it out for the default)", n.name, n.v)
		}
	}
	if c.ClientPrefix6 == off {
		return l, fmt.Errorf("backend.client_prefix_v6 cannot be off (-1): %s", whyNotOff["client_prefix_v6"])
	}
	if c.ClientPrefix6 < 0 || c.ClientPrefix6 > 128 {
		return l, fmt.Errorf("backend.client_prefix_v6: %d is not a prefix length from 1 to 128", c.ClientPrefix6)
	}
	if err := guardNameError("backend.guard", c.Guard); c.Guard != "" && err != nil {
		return l, err
	}
	switch {
	case c.Instances == off:
		return l, fmt.Errorf("backend.instances cannot be off (-1): %s", whyNotOff["instances"])
	case c.Instances < 0:
		return l, fmt.Errorf("backend.instances: %d is not a count of gateways: write a whole number of at least 1 (leave it out for 1)", c.Instances)
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
			case d < off:
				return l, fmt.Errorf("%s: %v is negative: write a positive duration, or -1 for off", path, time.Duration(d))
			}
		}
	}
	if ep, ok := c.cachedWithoutCache(); ok {
		return l, fmt.Errorf("backend.cache.%s: %v, but cache_size is -1 (no micro-cache): write -1 or leave %s out", ep, time.Duration(c.Cache[ep]), ep)
	}
	l.InFlight = offOr(c.MaxInFlight, admission.DefaultLimit)
	l.MainThread = offOr(c.MaxMainThread, admission.DefaultMainThreadLimit)
	l.PerClient = offOr(c.MaxPerClient, admission.DefaultQuota)
	l.Queue = offOr(c.QueueLength, admission.DefaultQueue)
	if l.Queue > 0 {
		l.Wait = cmp.Or(time.Duration(c.QueueWait), admission.DefaultWait)
	}
	l.Timeout = durationOr(c.Timeout, defaultTimeout)
	l.Coalesce = c.Coalesce == nil || *c.Coalesce
	if c.CacheSize != off {
		l.CacheSize = cmp.Or(c.CacheSize, microcache.DefaultMaxBytes)
	}
	l.MaxResponse = cmp.Or(c.MaxResponse, defaultMaxResponse)
	l.MaxHeld = cmp.Or(c.MaxHeld, defaultMaxHeld)
	if l.MaxResponse > l.MaxHeld {
		return l, fmt.Errorf("backend.max_response: %d (%s) is more than max_held, %d (%s): no answer that large could be held; write max_held %d or more, or a smaller max_response",
			l.MaxResponse, sizeText(l.MaxResponse), l.MaxHeld, sizeText(l.MaxHeld), l.MaxResponse)
	}
	if why := c.instancesTooMany(); why != "" {
		return l, fmt.Errorf("backend.instances: %d %s", c.Instances, why)
	}
	return l.PerInstance(max(1, c.Instances)), nil
}

// limitsDiff lists the server limits (guard.Limits.Server) of a that b
// does not share, by option name.
func limitsDiff(a, b guard.Limits) string {
	var out []string
	add := func(name string, x, y any) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %v", name, x))
		}
	}
	add("max_in_flight", a.InFlight, b.InFlight)
	add("max_main_thread", a.MainThread, b.MainThread)
	add("queue_length", a.Queue, b.Queue)
	add("queue_wait", a.Wait, b.Wait)
	add("cache_size", a.CacheSize, b.CacheSize)
	add("max_response", a.MaxResponse, b.MaxResponse)
	add("max_held", a.MaxHeld, b.MaxHeld)
	add("instances", a.Instances, b.Instances)
	add("max_streams", a.Streams, b.Streams)
	add("max_topics", a.Topics, b.Topics)
	return strings.Join(out, ", ")
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
	lv, err := resolveLive(c.LiveConfig)
	if err != nil {
		return l, lv, err
	}
	l.Streams, l.Topics = lv.maxStreams, lv.maxTopics
	lv.writeTimeout = c.writeTimeout()
	return l, lv, nil
}
