package caddymodule

// This file holds the messages of mistakes that only the global statusgate
// option and a handler together make: each names the global option, the
// server or the defaults by name, and a fix that applies to the config as
// written.

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// cacheOverNoCache is the endpoint, the first by name, that a handler in
// front of server s gives a cache time to live while s has cache_size off,
// and whether the time is the defaults' (d) rather than the handler's own
// (own): "" when there is none.
func cacheOverNoCache(own map[string]caddy.Duration, d *Defaults, s *Server) (ep string, ttl time.Duration, fromDefaults bool) {
	if s == nil || s.Backend.CacheSize != off {
		return "", 0, false
	}
	merged := maps.Clone(own)
	if d != nil {
		merged = mergeEndpoints(own, d.Backend.Cache)
	}
	for _, name := range slices.Sorted(maps.Keys(merged)) {
		if merged[name] > 0 {
			_, mine := own[name]
			return name, time.Duration(merged[name]), !mine
		}
	}
	return "", 0, false
}

// cacheOverNoCacheCaddyfile is cacheOverNoCache's message in the
// Caddyfile's words, for a handler whose block says server name.
func cacheOverNoCacheCaddyfile(name, ep string, ttl time.Duration, fromDefaults bool) string {
	if fromDefaults {
		return fmt.Sprintf("server %s: the global statusgate option's defaults say cache %s %v, but server %s has cache_size off in its block there, so it has no micro-cache to keep %s in: "+
			"write cache %s off in this block, or take cache %s out of the global option's defaults, or give server %s a cache_size", name, ep, ttl, name, ep, ep, ep, name)
	}
	return fmt.Sprintf("cache: %s %v, but server %s, which this block fronts, has cache_size off in the global statusgate option, so it has no micro-cache: "+
		"write cache %s off or leave the line out, or give server %s a cache_size", ep, ttl, name, ep, name)
}

// cacheOverNoCacheJSON is cacheOverNoCache's message in the JSON's words
// (paths under apps.statusgate for the app's part), for a handler whose
// "server" is name.
func cacheOverNoCacheJSON(name, ep string, ttl time.Duration, fromDefaults bool) string {
	if fromDefaults {
		return fmt.Sprintf("backend.cache.%s: %v, taken from the statusgate app's defaults (apps.statusgate.defaults.backend.cache.%s), but server %s has cache_size -1 (apps.statusgate.servers.%s.backend.cache_size), so it has no micro-cache: "+
			"give this handler's backend.cache a %s of -1, or take %s out of the defaults' cache, or give server %s a cache_size", ep, ttl, ep, name, name, ep, ep, name)
	}
	return fmt.Sprintf("backend.cache.%s: %v, but server %s, which this handler fronts, has cache_size -1 (apps.statusgate.servers.%s.backend.cache_size), so it has no micro-cache: "+
		"give %s -1, or leave it out, or give server %s a cache_size", ep, ttl, name, name, ep, name)
}

// guardShareConflict finds two declared servers that name one guard with
// different limits: handlers in front of either would count at one guard
// under limits that cannot both hold. It returns the two servers' names
// (in name order), the guard's name and each one's differing limits; ""
// when there are none. Servers whose limits are wrong in themselves are
// left to checkServers.
func guardShareConflict(servers map[string]*Server) (first, second, name, firstDiff, secondDiff string) {
	byGuard := map[string]string{}
	for _, s := range slices.Sorted(maps.Keys(servers)) {
		srv := servers[s]
		if srv == nil || srv.Backend.Guard == "" {
			continue
		}
		other, ok := byGuard[srv.Backend.Guard]
		if !ok {
			byGuard[srv.Backend.Guard] = s
			continue
		}
		a, _, errA := resolveGuard(servers[other].Backend)
		b, _, errB := resolveGuard(srv.Backend)
		if errA != nil || errB != nil {
			continue
		}
		if serverLimits(a) != serverLimits(b) {
			return other, s, srv.Backend.Guard, limitsDiff(a, b), limitsDiff(b, a)
		}
	}
	return "", "", "", "", ""
}

// guardShareFix is the fix for guardShareConflict's servers first and
// second, guard name, in the config's words (caddyfile or JSON).
func guardShareFix(first, second string, caddyfile bool) string {
	if caddyfile {
		return fmt.Sprintf("give servers %s and %s the same limits, or one of them a guard of another name (or none: each server then has a guard of its own)", first, second)
	}
	return fmt.Sprintf("give apps.statusgate.servers.%s.backend and servers.%s.backend the same limits, or one of them another guard (or none: each server then has a guard of its own)", first, second)
}
