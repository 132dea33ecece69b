package caddymodule

// This file is what every backend option shares: off, why some options
// cannot be off, and how an option left out takes its default.

import (
	"cmp"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// off is how the JSON switches a backend option off; the Caddyfile writes
// it off. 0, like an absent field, means the default.
const off = -1

// whyNotOff says, for the errors of the Caddyfile and of the JSON alike,
// why an option cannot be switched off.
var whyNotOff = map[string]string{
	"queue_wait":       "nobody waits without a bound",
	"max_response":     "it bounds the memory one answer takes",
	"max_held":         "it bounds the memory slow clients can make the gateway hold",
	"client_prefix_v6": "every address belongs to some client; 128 counts each IPv6 address as its own",
	"guard":            "every handler has one; leave guard out for the guard of the backend the handler declares",
	"instances":        "every gateway is one of at least one; leave instances out (or write 1) for a gateway alone",
	"stream_heartbeat": "a stream that stays silent is closed by the proxies in front",
}

// durationOr resolves a duration option that can be off: 0 is def, and off
// is none (0).
func durationOr(d caddy.Duration, def time.Duration) time.Duration {
	switch d {
	case 0:
		return def
	case off:
		return 0
	}
	return time.Duration(d)
}

// offOr resolves a count option that can be off: 0 is def, and off is none
// (0).
func offOr(v, def int) int {
	if v == off {
		return 0
	}
	return cmp.Or(v, def)
}
