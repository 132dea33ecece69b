package caddymodule

// This file is what the config load's app checks once every app of the
// load is provisioned: the mistakes that a handler cannot see, because they
// are in the handlers around it (internal/chain reads the routes).

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/caddymodule/internal/chain"
)

// rateLimitID is caddy-ratelimit's handler, known by its module ID: the
// module is the user's to build in, not a dependency of statusgate's.
const rateLimitID = "http.handlers.rate_limit"

// countsEvery reports whether the rate_limit h counts every request that
// reaches it: whether one of its zones has no matcher of its own (a zone's
// match, after provisioning its unexported matcherSets). A zone that
// matches only some requests (match { path /login }) may never count
// statusgate's; and a rate_limit whose zones cannot be read (another
// version of caddy-ratelimit) is taken to count none, so that the check is
// never a false alarm (test/gateway/testdata/routes fails if that happens to the
// version cmd/caddy builds).
func countsEvery(h any) bool {
	v := reflect.Indirect(reflect.ValueOf(h))
	if v.Kind() != reflect.Struct {
		return false
	}
	zones := v.FieldByName("RateLimits")
	if zones.Kind() != reflect.Map {
		return false
	}
	for it := zones.MapRange(); it.Next(); {
		z := reflect.Indirect(it.Value())
		if z.Kind() != reflect.Struct {
			return false
		}
		raw, sets := z.FieldByName("MatcherSetsRaw"), z.FieldByName("matcherSets")
		if raw.Kind() != reflect.Slice || sets.Kind() != reflect.Slice {
			return false
		}
		if raw.Len() == 0 && sets.Len() == 0 {
			return true
		}
	}
	return false
}

// passThrough are the handlers, by module ID, that never answer a request
// themselves: each changes it, or counts it, and hands it on. A statusgate
// of the form of 1.0 followed by these alone (a site-level rate_limit
// ordered after it) has nothing after it to reach its backend.
var passThrough = map[string]bool{
	rateLimitID: true, "http.handlers.headers": true, "http.handlers.encode": true, "http.handlers.vars": true,
	"http.handlers.request_body": true, "http.handlers.log_append": true, "http.handlers.tracing": true, "http.handlers.map": true,
}

// answersAny reports whether one of the handlers next could answer a
// request: any handler but the pass-through ones (a subroute, whose routes
// are not looked into, may).
func answersAny(next []chain.Step) bool {
	for _, s := range next {
		if !passThrough[chain.ModuleID(s.Handler)] {
			return true
		}
	}
	return false
}

// routeMistakes are the statusgate handlers of the servers that no handler can
// follow though they need one (the form of 1.0: no upstreams of their own
// nor a declared server), and those with a rate_limit before them on their
// chain. ours tells a statusgate handler of the load from the others, and
// whether it needs a handler after it. Each mistake once, with its fix and every place it is made (a
// site's rate_limit before its every handle block is one mistake, not one
// per handler), in one line: caddy reload shows the error JSON-encoded,
// where a line break is a literal \n.
func routeMistakes(servers map[string]*caddyhttp.Server, ours func(caddyhttp.MiddlewareHandler) (needsNext, ok bool)) error {
	var limited, unfollowed []string // the places, each with its own detail
	var limitedAt, unfollowedAt []string
	chain.Walk(servers, func(l chain.Link) {
		needsNext, ok := ours(l.Handler)
		if !ok {
			return
		}
		for _, s := range l.Before {
			if chain.ModuleID(s.Handler) == rateLimitID && countsEvery(s.Handler) {
				limited, limitedAt = append(limited, l.Where.String()), append(limitedAt, s.Path)
				break
			}
		}
		if needsNext && (!l.Followed || !answersAny(l.Next)) {
			after := "no handler runs after it"
			if l.Followed {
				after = "no handler that answers runs after it (the " + strings.TrimPrefix(chain.ModuleID(l.Next[0].Handler), "http.handlers.") + " at " + l.Next[0].Path + " only hands the request on)"
			}
			unfollowed, unfollowedAt = append(unfollowed, l.Where.String()), append(unfollowedAt, after)
		}
	})
	var msgs []string
	const limitFix = "so it counts every request (the gateway's own 404s and cached answers too) and its 429 is Caddy's, without the gateway's JSON envelope and CORS header; add `order rate_limit after statusgate` to the global options (in a route block, or in JSON, put rate_limit after statusgate in the same list), and it counts only the trips that reach the backend"
	switch len(limited) {
	case 0:
	case 1:
		msgs = append(msgs, fmt.Sprintf("statusgate in %s: the rate_limit at %s runs before it, %s", limited[0], limitedAt[0], limitFix))
	default:
		places := make([]string, len(limited))
		for i := range limited {
			places[i] = fmt.Sprintf("(%d) statusgate in %s, the rate_limit at %s", i+1, limited[i], limitedAt[i])
		}
		msgs = append(msgs, fmt.Sprintf("a rate_limit runs before statusgate in %d places, %s; the places: %s", len(limited), limitFix, strings.Join(places, "; ")))
	}
	const nextFix = "every request it lets through would be answered 502 Bad gateway; name the game server in statusgate itself, as in statusgate 127.0.0.1:8080 (or server NAME, one the global statusgate option declares), or put the reverse_proxy of the form of 1.0 after it"
	switch len(unfollowed) {
	case 0:
	case 1:
		msgs = append(msgs, fmt.Sprintf("statusgate in %s declares no upstreams, and %s: %s", unfollowed[0], unfollowedAt[0], nextFix))
	default:
		places := make([]string, len(unfollowed))
		for i := range unfollowed {
			places[i] = fmt.Sprintf("(%d) statusgate in %s: %s", i+1, unfollowed[i], unfollowedAt[i])
		}
		msgs = append(msgs, fmt.Sprintf("%d statusgate handlers declare no upstreams, and nothing that answers runs after them: for each, %s; the places: %s", len(unfollowed), nextFix, strings.Join(places, "; ")))
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; and "))
}

// chainEnds are the handlers of the servers' routes that ours accepts
// (they must be comparable: a respond's is a struct with maps) and that
// nothing can follow, wherever they are: one the routes hold in several
// places is one only if it ends its chain in each. One the walk cannot
// place (in a named route, or a reverse_proxy's handle_response) is none:
// what may follow it is not known.
func chainEnds(servers map[string]*caddyhttp.Server, ours func(caddyhttp.MiddlewareHandler) bool) map[caddyhttp.MiddlewareHandler]bool {
	ends, followed := map[caddyhttp.MiddlewareHandler]bool{}, map[caddyhttp.MiddlewareHandler]bool{}
	chain.Walk(servers, func(l chain.Link) {
		switch {
		case !ours(l.Handler):
		case l.Followed:
			followed[l.Handler] = true
		default:
			ends[l.Handler] = true
		}
	})
	for h := range followed {
		delete(ends, h)
	}
	return ends
}
