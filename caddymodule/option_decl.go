package caddymodule

// This file reads the declaration of every backend option, written once as
// tags beside its JSON name (BackendConfig, LiveConfig), and derives from
// it what the rest of the module asks of an option: whether it is the
// server's or the front door's, whether it can be off and why not, and
// which of a guard's limits its handlers must agree on.

import (
	"fmt"
	"reflect"
	"strings"

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
//
// How many places one client may take (max_per_client, and
// max_streams_per_client for streams), a request's budget (timeout) and
// whether identical requests share a trip (coalesce) are the front door's:
// a public site and a staff dashboard in front of one server may choose
// differently, and still count at one guard. A field of guard.Limits names
// the option it resolves with its option tag, and so is the server's or
// the door's as that option is.
type optionDecl struct {
	server    bool   // the server's; else the front door's
	whyNotOff string // why it cannot be off; "": it can
}

// limitField is a field of guard.Limits and the option it resolves.
type limitField struct {
	index  int
	option string
}

var (
	// optionDecls are the backend options' declarations by JSON name.
	optionDecls = must(declareOptions(reflect.TypeFor[BackendConfig]()))
	// limitFields are guard.Limits' fields, in order.
	limitFields = must(declareLimits(reflect.TypeFor[guard.Limits](), optionDecls))

	// serverOptions are the backend options that are the server's; every
	// other is the front door's.
	serverOptions = optionSet(func(d optionDecl) bool { return d.server })
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

// must is v, or a panic at the package's start: an option declared wrong
// is the module's mistake, which every test then reports.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// declareOptions reads the declarations of t's options (BackendConfig's),
// and refuses an option whose side is not declared.
func declareOptions(t reflect.Type) (map[string]optionDecl, error) {
	decls := map[string]optionDecl{}
	for _, m := range confjson.Members(reflect.New(t).Elem()) {
		var d optionDecl
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
		decls[m.Name] = d
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
		out = append(out, limitField{i, name})
	}
	return out, nil
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
