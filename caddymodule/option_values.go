package caddymodule

// This file is what every backend option shares: off, and how an option
// left out takes its default (which cannot be off, and why, each option
// declares beside its JSON name).

import (
	"cmp"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// off is how the JSON switches a backend option off; the Caddyfile writes
// it off. 0, like an absent field, means the default.
const off = -1

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
