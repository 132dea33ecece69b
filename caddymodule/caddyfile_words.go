package caddymodule

// This file is the Caddyfile's word readers: one option's arguments read,
// checked and turned into the JSON's values, every error with the word and
// its line, for the statusgate block and the global statusgate option alike.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/statusgate/statusgate/internal/ident"
	"github.com/statusgate/statusgate/internal/onoff"
)

// switchArg reads an option's on|off (or true|false) as a pointer, the way
// the JSON spells a switch whose absence means its default; optional says a
// bare option means on.
func switchArg(d *caddyfile.Dispenser, opt string, optional bool) (*bool, error) {
	on, err := onoffArg(d, opt, optional)
	return &on, err
}

// onoffArg is onoff.Parse, whose argument errors give opt's syntax.
func onoffArg(d *caddyfile.Dispenser, opt string, optional bool) (bool, error) {
	on, err := onoff.Parse(d, opt, optional)
	if errors.Is(err, onoff.ErrArgCount) {
		err = argErr(d, opt, caddyfileSyntax)
	}
	return on, err
}

// perEndpoint reads an option that names an endpoint and then its value for
// it, read by value, into the map m, once per endpoint.
func perEndpoint[T any](d *caddyfile.Dispenser, once func(string) error, m *map[string]T, value func() (T, error)) error {
	opt := d.Val()
	name, err := endpointArg(d)
	if err != nil {
		return err
	}
	if err := once(opt + " " + name); err != nil {
		return err
	}
	v, err := value()
	if err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]T{}
	}
	(*m)[name] = v
	return nil
}

// fieldWord is a field name of a protected_fields line, for
// checkFieldLines: its endpoint and its token (the word, its file and line).
type fieldWord struct {
	endpoint string
	at       caddyfile.Token
}

// fieldArgs reads the rest of a protected_fields or extra_fields line, the
// dispenser at its endpoint: the member names, each once (none means hide
// nothing, not the default), and where each is written.
func fieldArgs(d *caddyfile.Dispenser, opt string) ([]string, []fieldWord, error) {
	endpoint := d.Val()
	fields := []string{}
	var at []fieldWord
	for d.NextArg() {
		if d.Val() == "" {
			return nil, nil, d.Errf("%s: empty field name", opt)
		}
		if !slices.Contains(fields, d.Val()) {
			fields = append(fields, d.Val())
			at = append(at, fieldWord{endpoint, d.Token()})
		}
	}
	return fields, at, nil
}

// checkFieldLines checks the names of the protected_fields lines with
// fieldError against extra, the names extra_fields gives each endpoint: an
// error names the word and its line.
func checkFieldLines(words []fieldWord, extra map[string][]string) error {
	for _, w := range words {
		if err := fieldError(w.endpoint, w.at.Text, extra[w.endpoint], fmt.Sprintf("write extra_fields %s %s too", w.endpoint, w.at.Text)); err != nil {
			return errAt(w.at, "protected_fields: %v", err)
		}
	}
	return nil
}

// switchEndpoints reads an enable or disable line: at least one endpoint,
// each switched at most once in the block, whichever line names it.
func switchEndpoints(d *caddyfile.Dispenser, once func(string) error, m *map[string]bool, on bool) error {
	opt := d.Val()
	if !d.NextArg() {
		return argErr(d, opt, caddyfileSyntax)
	}
	for {
		name := d.Val()
		if !validEndpointName(name) {
			return d.Errf("%s: %v", opt, endpointNameError(name))
		}
		if err := once("enable/disable " + name); err != nil {
			return err
		}
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[name] = on
		if !d.NextArg() {
			return nil
		}
	}
}

// queueArgs reads a queue line: its length or off, and an optional wait,
// which cannot be off and means nothing after off.
func queueArgs(d *caddyfile.Dispenser, b *BackendConfig) error {
	opt := d.Val()
	if !d.NextArg() {
		return argErr(d, opt, caddyfileSyntax)
	}
	n, err := limitWord(d, opt)
	if err != nil {
		return err
	}
	b.QueueLength = n
	if d.NextArg() {
		if n == off {
			return d.Errf("%s: '%s' after off: with the queue off nobody waits", opt, d.Val())
		}
		if d.Val() == "off" {
			return d.Errf("%s: the wait cannot be off: %s; write queue off to refuse at once when the backend is busy", opt, whyNotOff["queue_wait"])
		}
		if b.QueueWait, err = positiveDuration(d, opt, false); err != nil {
			return err
		}
	}
	if d.NextArg() {
		return argErr(d, opt, caddyfileSyntax)
	}
	return nil
}

// heldFits checks, once the block is read, that no answer max_response lets
// the gateway hold is larger than max_held, the default of either where it
// is not written. The error is at max_response's line (max_held's when only
// that is written), shows each size as written and the other's line. Within
// this gateway's share of max_held (instances) is Provision's check.
func heldFits(b *BackendConfig, written map[string]asWritten) error {
	if len(written) == 0 || cmp.Or(b.MaxResponse, defaultMaxResponse) <= cmp.Or(b.MaxHeld, defaultMaxHeld) {
		return nil
	}
	at, ok := written["max_response"]
	if !ok {
		at = written["max_held"]
	}
	shown := func(name string, def int64) string {
		w, ok := written[name]
		switch {
		case !ok:
			return sizeText(def) + ", its default"
		case w.d.Line() == at.d.Line():
			return w.word
		}
		return fmt.Sprintf("%s (at %s:%d)", w.word, w.d.File(), w.d.Line())
	}
	response, held := shown("max_response", defaultMaxResponse), shown("max_held", defaultMaxHeld)
	need := sizeText(defaultMaxResponse)
	if w, ok := written["max_response"]; ok {
		need = w.word
	}
	if _, ok := written["max_response"]; ok {
		return at.d.Errf("max_response: %s is more than max_held, %s: no answer that large could be held; write max_held %s or more, or a smaller max_response", response, held, need)
	}
	return at.d.Errf("max_held: %s is less than max_response, %s: no answer that large could be held; write max_held %s or more, or a smaller max_response", held, response, need)
}

// asWritten is an option's value as a Caddyfile line wrote it, and the line
// (the dispenser at the value) for errors: for a check that needs the whole
// block, which an option written later may change.
type asWritten struct {
	word string
	d    caddyfile.Dispenser
}

// oneArg reads the one argument left on the line of the option opt with
// word, which reads the current token, and refuses a second.
func oneArg[T any](d *caddyfile.Dispenser, opt string, word func(d *caddyfile.Dispenser, opt string) (T, error)) (T, error) {
	var zero T
	if !d.NextArg() {
		return zero, argErr(d, opt, caddyfileSyntax)
	}
	v, err := word(d, opt)
	if err != nil {
		return zero, err
	}
	if d.NextArg() {
		return zero, argErr(d, opt, caddyfileSyntax)
	}
	return v, nil
}

// offWord reads the current token, an argument of opt, when it is off: as
// -1 where opt can be off, and where it cannot (whyNotOff), as the error that
// says why. ok is false for any other word.
func offWord(d *caddyfile.Dispenser, opt string) (v int, ok bool, err error) {
	if d.Val() != "off" {
		return 0, false, nil
	}
	if why, cannot := whyNotOff[opt]; cannot {
		return 0, true, d.Errf("%s cannot be off: %s", opt, why)
	}
	return off, true, nil
}

// limitWord reads the current token, an argument of opt, as a whole number
// of at least 1, or off (as -1).
func limitWord(d *caddyfile.Dispenser, opt string) (int, error) {
	if v, ok, err := offWord(d, opt); ok {
		return v, err
	}
	return positiveInt(d, opt, canBeOff(opt))
}

// positiveInt reads the current token, an argument of opt, as a whole number
// of at least 1; orOff says the error offers off too.
func positiveInt(d *caddyfile.Dispenser, opt string, orOff bool) (int, error) {
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), orOffWant("a whole number of at least 1", " or off", orOff))
	}
	return n, nil
}

// durationWord reads the current token, an argument of opt, as a positive
// duration, or off (as -1) where opt can be off.
func durationWord(d *caddyfile.Dispenser, opt string) (caddy.Duration, error) {
	if v, ok, err := offWord(d, opt); ok {
		return caddy.Duration(v), err
	}
	return positiveDuration(d, opt, canBeOff(opt))
}

// positiveDuration reads the current token, an argument of opt, as a
// positive duration in Caddy's syntax (500ms, 2s, 1m30s); orOff says the
// error offers off too.
func positiveDuration(d *caddyfile.Dispenser, opt string, orOff bool) (caddy.Duration, error) {
	t, err := caddy.ParseDuration(d.Val())
	if err != nil || t <= 0 {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), orOffWant("a positive duration such as 500ms or 2s", ", or off", orOff))
	}
	return caddy.Duration(t), nil
}

// sizeWord reads the current token, an argument of opt, as a size in bytes
// (16MiB, 512KiB), or off (as -1) where opt can be off.
func sizeWord(d *caddyfile.Dispenser, opt string) (int64, error) {
	if v, ok, err := offWord(d, opt); ok {
		return int64(v), err
	}
	n, err := humanize.ParseBytes(d.Val())
	if err != nil || n == 0 || n > 1<<40 {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), orOffWant("a size such as 16MiB", ", or off", canBeOff(opt)))
	}
	return int64(n), nil
}

// orOffWant is what an option takes, want, and orOff's words when it can be
// off.
func orOffWant(want, orOff string, offers bool) string {
	if offers {
		return want + orOff
	}
	return want
}

// countWord reads the current token, an argument of opt, as a whole number
// from 1 to the most opt's declaration gives it, for a count that cannot
// be off.
func countWord(d *caddyfile.Dispenser, opt string) (int, error) {
	if _, ok, err := offWord(d, opt); ok {
		return 0, err
	}
	decl := optionDecls[opt]
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 || decl.most != 0 && int64(n) > decl.most {
		return 0, d.Errf("%s: '%s' is not %s", opt, d.Val(), decl.want())
	}
	return n, nil
}

// endpointArg reads the endpoint name argument of the current subdirective.
func endpointArg(d *caddyfile.Dispenser) (string, error) {
	opt := d.Val()
	if !d.NextArg() {
		return "", argErr(d, opt, caddyfileSyntax)
	}
	name := d.Val()
	if !validEndpointName(name) {
		return "", d.Errf("%s: %v", opt, endpointNameError(name))
	}
	return name, nil
}

// serverNameWord reads the name of a declared server (a handler's server
// option).
func serverNameWord(d *caddyfile.Dispenser, opt string) (string, error) {
	if !ident.Valid(d.Val()) {
		return "", d.Errf("%s: '%s' is not a name of letters, digits, '_' and '-'", opt, d.Val())
	}
	return d.Val(), nil
}
