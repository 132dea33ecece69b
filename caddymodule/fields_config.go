package caddymodule

// This file is how an endpoint's hidden fields are worked out from the
// three places that name them: the built-in defaults, the global
// statusgate option and the handler's own lines. A list adds to what the
// places before it hide; only publish_fields, which names each field it
// publishes, or a list written with no fields ("hide nothing", the
// interface's own form), make a field hidden elsewhere public, so that
// `protected_fields player uuid` (meant: also hide the UUID) never
// publishes op, banned and the linked Discord account (docs/field-layer.md).

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// fieldLevel is one place that names an endpoint's hidden fields.
type fieldLevel struct {
	where string // for messages: "the global statusgate option", "this handler"
	// path is the JSON path of its lists, "auth" or "defaults.auth"; ""
	// in the Caddyfile, whose errors name the line instead.
	path    string
	fields  map[string][]string // protected_fields
	publish map[string][]string // publish_fields
}

// hiddenField is a field an endpoint hides, and which place hides it.
type hiddenField struct {
	name, by string
}

// layerFields is what endpoint ep hides after the level l is applied to
// base (what the places before it hide): its protected_fields entry adds to
// base, or, written with no fields, hides nothing; its publish_fields entry
// then takes the fields it names out. Each published field must be hidden
// by a place before l, and not named by l's own list: a publish that
// publishes nothing, or contradicts its own line, is a mistake.
func layerFields(base []hiddenField, l fieldLevel, ep string) ([]hiddenField, error) {
	list, written := l.fields[ep]
	publish := l.publish[ep]
	at, protected := "publish_fields "+ep, "protected_fields "+ep
	if l.path != "" {
		at, protected = l.path+".publish_fields."+ep, l.path+".protected_fields."+ep
	}
	for _, f := range publish {
		if slices.Contains(list, f) {
			return nil, fmt.Errorf("%s: %s is also in %s: a field is hidden or published, not both", at, f, protected)
		}
		if !slices.ContainsFunc(base, func(h hiddenField) bool { return h.name == f }) {
			return nil, fmt.Errorf("%s: %s is not hidden by %s, so there is nothing to publish (%s hides %s); publish_fields only makes public what is hidden elsewhere", at, f, placesBefore(l), ep, hiddenNames(base))
		}
	}
	if written && len(list) == 0 {
		return nil, nil
	}
	out := slices.Clone(base)
	for _, f := range list {
		if !slices.ContainsFunc(out, func(h hiddenField) bool { return h.name == f }) {
			out = append(out, hiddenField{f, l.where})
		}
	}
	return slices.DeleteFunc(out, func(h hiddenField) bool { return slices.Contains(publish, h.name) }), nil
}

// placesBefore names the places before l, for messages.
func placesBefore(l fieldLevel) string {
	if l.where == handlerLevel {
		return "default or by the global statusgate option"
	}
	return "default"
}

// The places after the defaults, as messages name them.
const (
	handlerLevel = "this handler"
	globalLevel  = "the global statusgate option"
)

// fieldLevels are the levels of the global option's defaults global (nil:
// none) and of a handler's own auth, whose lists are at the JSON path
// path ("" in the Caddyfile).
func fieldLevels(global *AuthConfig, own *AuthConfig, path string) []fieldLevel {
	var levels []fieldLevel
	if global != nil {
		gp := ""
		if path != "" {
			gp = "defaults." + path
		}
		levels = append(levels, fieldLevel{where: globalLevel, path: gp, fields: global.ProtectedFields, publish: global.PublishFields})
	}
	return append(levels, fieldLevel{where: handlerLevel, path: path, fields: own.ProtectedFields, publish: own.PublishFields})
}

// withGlobalExtra is c's extra_fields with those of the global option's
// defaults global (nil: none) beside them.
func withGlobalExtra(c, global *AuthConfig) map[string][]string {
	extra := maps.Clone(c.ExtraFields)
	if global == nil {
		return extra
	}
	for ep, fields := range global.ExtraFields {
		if extra == nil {
			extra = map[string][]string{}
		}
		extra[ep] = append(slices.Clip(extra[ep]), fields...)
	}
	return extra
}

// hiddenNames lists the names of fields, for messages: "nothing" for none.
func hiddenNames(fields []hiddenField) string {
	if len(fields) == 0 {
		return "nothing"
	}
	return strings.Join(hiddenFieldNames(fields), " ")
}

// endpointFields is what the endpoint ep with the default list defaults
// hides after every level: each field with the place that hides it, and
// the fields hidden at some level that a later one published.
func endpointFields(ep string, defaults []string, levels []fieldLevel) (hidden, published []hiddenField, err error) {
	for _, f := range defaults {
		hidden = append(hidden, hiddenField{f, "default"})
	}
	for _, l := range levels {
		before := hidden
		if hidden, err = layerFields(hidden, l, ep); err != nil {
			return nil, nil, err
		}
		for _, f := range before {
			if !slices.ContainsFunc(hidden, func(h hiddenField) bool { return h.name == f.name }) {
				how := "publish_fields " + ep
				if list, ok := l.fields[ep]; ok && len(list) == 0 {
					how = "protected_fields " + ep + " with no fields"
				}
				published = append(published, hiddenField{f.name, f.by + ", published by " + how + " in " + l.where})
			}
		}
	}
	return hidden, published, nil
}

// hiddenFieldNames are the names of fields.
func hiddenFieldNames(fields []hiddenField) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return names
}
