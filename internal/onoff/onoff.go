// Package onoff reads the on|off argument of a Caddyfile subdirective, with
// one wording for every module of this repository: on and true mean on, off
// and false mean off, and nothing else is accepted.
package onoff

import (
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// ErrArgCount is in Parse's error, which has the file and line, when the
// line has no on|off where one is needed, or more after it: the caller may
// answer with the whole syntax of its option instead.
var ErrArgCount = errors.New("wrong argument count")

// Parse reads the on|off argument of subdirective opt, the dispenser's
// current token, and makes sure nothing follows it on the line. With
// optional, a bare subdirective means on; without, it is an argument error.
func Parse(d *caddyfile.Dispenser, opt string, optional bool) (bool, error) {
	if !d.NextArg() {
		if optional {
			return true, nil
		}
		return false, argErr(d)
	}
	var on bool
	switch d.Val() {
	case "on", "true":
		on = true
	case "off", "false":
	default:
		return false, d.Errf("%s: '%s' is not on, off, true or false", opt, d.Val())
	}
	if d.NextArg() {
		return false, argErr(d)
	}
	return on, nil
}

// argErr is the dispenser's ArgErr, with ErrArgCount in it.
func argErr(d *caddyfile.Dispenser) error {
	return d.WrapErr(fmt.Errorf("%w or unexpected line ending after '%s'", ErrArgCount, d.Val()))
}
