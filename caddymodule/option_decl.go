package caddymodule

// This file reads the declaration of every backend option, written once as
// tags beside its JSON name (BackendConfig, LiveConfig), and derives from
// it what the rest of the module asks of an option: whether it is the
// server's or the front door's, whether it can be off and why not, which
// of a guard's limits its handlers must agree on, its line in the
// Caddyfile's syntax, the values it refuses and how a guard's limit takes
// it.

import (
	"cmp"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// An option's declaration is its field's tags:
//
//	statusgate:"server"  the server's limit: it counts the backend's work
//	                     (its slots, queue, main-thread lane, held bytes,
//	                     cache, streams and topics), so it is set once, in
//	                     a declared server (or a handler's own backend),
//	                     and every handler that shares the server's guard
//	                     must give the same (App.agree); the defaults, and
//	                     a handler fronting a declared server, cannot set it.
//	statusgate:"door"    the front door's choice: each handler's own, or
//	                     the defaults'; a declared server cannot set it.
//	notoff:"<why>"       it cannot be off (-1, off in the Caddyfile): why,
//	                     for the errors of the Caddyfile and the JSON alike.
//	caddyfile:"<line>"   its line in the statusgate block's syntax, without
//	                     "|off", which an option that can be off is given;
//	                     an option without one is written on another's line
//	                     (queue_wait, on queue's).
//	number:"<what>"      what a number of it is, in its errors, where its
//	                     kind's word ("a limit", "a size") says too little.
//	most:"<n>"           a count's or a size's largest value; every
//	                     number's least is 1 (or -1, off, where it can be
//	                     off).
//	leftout:"<value>"    what leaving it out gives, in its errors, where
//	                     "the default" says too little.
//	instead:"<what>"     of an option that cannot be off, what to write in
//	                     the JSON for what off would mean, in the error of
//	                     its -1.
//
// The range of every number (checkNumbers, numberError) comes from these
// and its kind alone: an option that cannot be off needs no check of its
// own.
//
// How many places one client may take (max_per_client, and
// max_streams_per_client for streams), a request's budget (timeout) and
// whether identical requests share a trip (coalesce) are the front door's:
// a public site and a staff dashboard in front of one server may choose
// differently, and still count at one guard. A field of guard.Limits names
// the option it resolves with its option tag, and so is the server's or
// the door's as that option is, and takes its value, its default
// (optionDefaults) where it is left out, or none (0) where it is off.
type optionDecl struct {
	name      string // JSON name
	server    bool   // the server's; else the front door's
	whyNotOff string // why it cannot be off; "": it can
	line      string // its Caddyfile line's syntax; "": none of its own
	kind      optionKind
	entries   bool   // a map of the endpoints' own values (cache, snapshot)
	number    string // what a number of it is; "": its kind's word
	most      int64  // its largest value; 0: none
	leftOut   string // what leaving it out gives; "": the default
	instead   string // what to write in the JSON instead of off; "": nothing
}

// optionKind is what an option's value is, as its type says: a count, a
// size in bytes, a duration (a map's: its entries'), or another (a
// switch, a name).
type optionKind int

const (
	otherKind optionKind = iota
	countKind
	sizeKind
	durationKind
)

func kindOf(t reflect.Type) optionKind {
	if t.Kind() == reflect.Map {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[caddy.Duration]():
		return durationKind
	case t.Kind() == reflect.Int64:
		return sizeKind
	case t.Kind() == reflect.Int:
		return countKind
	}
	return otherKind
}

// offIsMinusOne reports whether d's option is switched off by -1 (off in
// the Caddyfile): a number that can be off.
func (d optionDecl) offIsMinusOne() bool {
	return d.kind != otherKind && d.whyNotOff == ""
}

// limitField is a field of guard.Limits and the option it resolves.
type limitField struct {
	index  int
	option string
}

var (
	// backendDecls are the backend options' declarations in field order,
	// the order of the Caddyfile's syntax; optionDecls the same by name.
	backendDecls = mustDeclare(declareOptions(reflect.TypeFor[BackendConfig]()))
	optionDecls  = func() map[string]optionDecl {
		m := map[string]optionDecl{}
		for _, d := range backendDecls {
			m[d.name] = d
		}
		return m
	}()
	// limitFields are guard.Limits' fields, in order.
	limitFields = mustDeclare(declareLimits(reflect.TypeFor[guard.Limits](), optionDecls))

	// serverOptions are the backend options that are the server's; every
	// other is the front door's.
	serverOptions = optionSet(func(d optionDecl) bool { return d.server })
	// serverWords are the Caddyfile's words of the server's options.
	serverWords = func() map[string]bool {
		m := map[string]bool{}
		for _, d := range backendDecls {
			if word, _, _ := strings.Cut(d.line, " "); d.server && word != "" {
				m[word] = true
			}
		}
		return m
	}()
	// whyNotOff says why an option cannot be off, for those that cannot.
	whyNotOff = func() map[string]string {
		m := map[string]string{}
		for name, d := range optionDecls {
			if d.whyNotOff != "" {
				m[name] = d.whyNotOff
			}
		}
		return m
	}()
)

// mustDeclare is v, or a panic at the package's start: an option declared
// wrong is the module's mistake, which every test then reports.
func mustDeclare[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// declareOptions reads the declarations of t's options (BackendConfig's),
// and refuses an option whose side is not declared.
func declareOptions(t reflect.Type) ([]optionDecl, error) {
	var decls []optionDecl
	for _, m := range confjson.Members(reflect.New(t).Elem()) {
		d := optionDecl{name: m.Name, line: m.Field.Tag.Get("caddyfile"), kind: kindOf(m.Field.Type),
			entries: m.Field.Type.Kind() == reflect.Map, number: m.Field.Tag.Get("number"), leftOut: m.Field.Tag.Get("leftout"), instead: m.Field.Tag.Get("instead")}
		if most, ok := m.Field.Tag.Lookup("most"); ok {
			n, err := strconv.ParseInt(most, 10, 64)
			if err != nil || n < 1 || d.kind != countKind && d.kind != sizeKind {
				return nil, fmt.Errorf("backend option %s (field %s): most is the largest number it takes, not %q", m.Name, m.Field.Name, most)
			}
			d.most = n
		}
		switch side := m.Field.Tag.Get("statusgate"); side {
		case "server", "door":
			d.server = side == "server"
		default:
			return nil, fmt.Errorf("backend option %s (field %s): declare it statusgate:\"server\" or statusgate:\"door\" beside its JSON tag, not %q", m.Name, m.Field.Name, side)
		}
		if why, ok := m.Field.Tag.Lookup("notoff"); ok {
			if why == "" {
				return nil, fmt.Errorf("backend option %s (field %s): notoff says why it cannot be off: write the reason", m.Name, m.Field.Name)
			}
			d.whyNotOff = why
		}
		decls = append(decls, d)
	}
	return decls, nil
}

// declareLimits reads which option each field of t (guard.Limits)
// resolves, and refuses a field that names none of decls.
func declareLimits(t reflect.Type, decls map[string]optionDecl) ([]limitField, error) {
	var out []limitField
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("option")
		if _, ok := decls[name]; !ok {
			return nil, fmt.Errorf("%s.%s: its option tag names %q, not a backend option: name the option it resolves", t, f.Name, name)
		}
		if def := reflect.ValueOf(optionDefaults[name]); !def.IsValid() || !def.CanConvert(f.Type) {
			return nil, fmt.Errorf("%s.%s: option %s has no default of its type in optionDefaults", t, f.Name, name)
		}
		out = append(out, limitField{i, name})
	}
	return out, nil
}

// backendOptions are c's options by their JSON name, as settable values.
func backendOptions(c *BackendConfig) map[string]reflect.Value {
	opts := map[string]reflect.Value{}
	for _, m := range confjson.Members(reflect.ValueOf(c).Elem()) {
		opts[m.Name] = m.Value
	}
	return opts
}

// optionSet is the set of the options whose declaration is pick's.
func optionSet(pick func(optionDecl) bool) map[string]bool {
	set := map[string]bool{}
	for name, d := range optionDecls {
		if pick(d) {
			set[name] = true
		}
	}
	return set
}

// isServerOption and isDoorOption pick the options of one side, for
// setOption and takeOptions.
func isServerOption(name string) bool { return serverOptions[name] }
func isDoorOption(name string) bool   { return !serverOptions[name] }

// canBeOff reports whether the option opt can be off.
func canBeOff(opt string) bool {
	_, cannot := whyNotOff[opt]
	return !cannot
}

// serverLimits is l less the front door's choices: what a guard shares
// among every handler in front of it, on which they must agree.
func serverLimits(l guard.Limits) guard.Limits {
	v := reflect.ValueOf(&l).Elem()
	for _, f := range limitFields {
		if !serverOptions[f.option] {
			v.Field(f.index).SetZero()
		}
	}
	return l
}

// limitsDiff lists the server limits of a that b does not share, by
// option name.
func limitsDiff(a, b guard.Limits) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for _, f := range limitFields {
		x, y := va.Field(f.index).Interface(), vb.Field(f.index).Interface()
		if serverOptions[f.option] && x != y {
			out = append(out, fmt.Sprintf("%s %v", f.option, x))
		}
	}
	return strings.Join(out, ", ")
}

// checkNumbers refuses each number of c out of its option's range
// (numberError), in the options' order; a map's entries are its reader's
// (resolveLimits), who checks their names first.
func checkNumbers(c *BackendConfig) error {
	for _, m := range confjson.Members(reflect.ValueOf(c).Elem()) {
		if d := optionDecls[m.Name]; d.kind != otherKind && m.Value.CanInt() {
			if err := d.numberError("backend."+m.Name, m.Value.Int()); err != nil {
				return err
			}
		}
	}
	return nil
}

// numberError says why v, a number of d's option at path (a map's entry's
// path for an entry), is out of its range, or nil: off (-1) where it
// cannot be off, with why; below off, or below 1 where it cannot be off;
// above its most. 0 is left out (the default), which the JSON's reader
// refuses where it is written (a map entry's, resolveLimits).
func (d optionDecl) numberError(path string, v int64) error {
	switch {
	case v == off && d.whyNotOff != "" && d.instead != "":
		return fmt.Errorf("%s cannot be off (-1): %s; %s", path, d.whyNotOff, d.instead)
	case v == off && d.whyNotOff != "":
		return fmt.Errorf("%s cannot be off (-1): %s", path, d.whyNotOff)
	case v == off || v >= 0 && (d.most == 0 || v <= d.most):
		return nil
	case d.most != 0:
		return fmt.Errorf("%s: %d is not %s from 1 to %d", path, v, d.what(), d.most)
	}
	orOff, leftOut := "", ""
	if d.offIsMinusOne() {
		orOff = ", or -1 for off"
	}
	if !d.entries {
		leftOut = " (leave it out for " + cmp.Or(d.leftOut, "the default") + ")"
	}
	if d.kind == durationKind {
		return fmt.Errorf("%s: %v is negative: write a positive duration%s%s", path, time.Duration(v), orOff, leftOut)
	}
	return fmt.Errorf("%s: %d is not %s: %s%s%s", path, v, d.what(), d.write(), orOff, leftOut)
}

// what is what a number of d's option is, for its errors.
func (d optionDecl) what() string {
	switch {
	case d.number != "":
		return d.number
	case d.kind == sizeKind:
		return "a size"
	case d.kind == durationKind:
		return "a duration"
	}
	return "a limit"
}

// write says how a number of d's option is written, for its errors.
func (d optionDecl) write() string {
	switch {
	case d.most != 0:
		return fmt.Sprintf("write one from 1 to %d", d.most)
	case d.kind == sizeKind:
		return "write bytes, at least 1"
	case d.kind == durationKind:
		return `write a positive one ("2s")`
	}
	return "write a whole number of at least 1"
}

// want is what a Caddyfile word of d's option, a count that cannot be
// off, must be (countWord).
func (d optionDecl) want() string {
	if d.most != 0 {
		return fmt.Sprintf("%s from 1 to %d", d.what(), d.most)
	}
	return d.what() + ": " + d.write()
}

// takeLimits sets each of l's limits to its option's value in c, checked:
// its default where c leaves the option out (or writes 0), none (0) where
// c switches it off, and for a switch (coalesce) the default where c
// leaves it out.
func takeLimits(l *guard.Limits, c *BackendConfig) {
	opts := backendOptions(c)
	lv := reflect.ValueOf(l).Elem()
	for _, f := range limitFields {
		dst, src := lv.Field(f.index), opts[f.option]
		def := reflect.ValueOf(optionDefaults[f.option]).Convert(dst.Type())
		switch {
		case src.IsZero():
			dst.Set(def)
		case src.Kind() == reflect.Pointer:
			dst.Set(src.Elem())
		case src.Int() == off:
			dst.SetZero()
		default:
			dst.SetInt(src.Int())
		}
	}
}
