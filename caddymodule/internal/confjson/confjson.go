// Package confjson reads a module's JSON config member by member, so that a
// mistake in it stops Caddy with the option's path (backend.timeout,
// auth.keys[1], backend.cache.status), the value as it was written and what
// to write instead, and so that an unknown member is refused, nested ones
// included, with the nearest option's name. encoding/json alone names no
// path ("time: unknown unit "sec" in duration "5sec""), and a type with a
// JSON method of its own decodes its members without Caddy's check for
// unknown fields, which let a misspelt member pass in silence.
package confjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/nearest"
)

// Error is the error of one member: its path and what is wrong with it.
type Error struct {
	Path string // the member's path, e.g. backend.cache.status
	Msg  string // what is wrong and what to write
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// Hint says, for the member at path, what else may be written there, for
// the end of a message about a value of the wrong type ("-1 for off"); ""
// for nothing.
type Hint func(path string) string

// Object decodes the JSON object b into the struct v points to. Its members
// are the struct's exported fields by their json names (those of an
// embedded struct, or of the struct an embedded pointer points to, without
// a name of its own among them), matched exactly.
// path is the object's own path ("backend"), "" for the top. A member that
// is a struct with a JSON method of its own decodes itself (and its errors
// are expected to carry its path); a map decodes entry by entry and a
// slice element by element, so that an error names the entry
// (backend.cache.status, auth.keys[1]). given lists the members present
// and not null, as written, for checks of what was written.
func Object(b []byte, path string, v any, hint Hint) (given map[string]string, err error) {
	fields, names := byName(reflect.ValueOf(v).Elem())

	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, &Error{Path: orTop(path), Msg: "not an object of options: write {…}"}
	}
	// In name order, so that of several mistakes the same one is named
	// every time.
	for _, name := range sortedKeys(members) {
		at := join(path, name)
		f, ok := fields[name]
		if !ok {
			return nil, &Error{Path: at, Msg: "unknown option" + suggestion(name, names, path)}
		}
		raw := bytes.TrimSpace(members[name])
		if string(raw) != "null" {
			if given == nil {
				given = map[string]string{}
			}
			given[name] = string(raw)
		}
		if err := value(raw, at, f, hint); err != nil {
			return nil, err
		}
	}
	return given, nil
}

// A Member is one option of a struct of options: its JSON name, its field
// (whose other tags may declare more of it) and its value.
type Member struct {
	Name  string
	Field reflect.StructField
	Value reflect.Value
}

// Members lists the members of the struct v, in field order, as Object
// reads them: the exported fields by their json names, those of an
// embedded struct (or of the struct an embedded pointer points to) among
// them. v's values are settable when v is.
func Members(v reflect.Value) []Member {
	var out []Member
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if sf.Anonymous && tag == "" {
			switch f := v.Field(i); {
			case f.Kind() == reflect.Struct:
				out = append(out, Members(f)...)
				continue
			case f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.Struct:
				out = append(out, Members(f.Elem())...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		name := tag
		if name == "" {
			name = sf.Name
		}
		out = append(out, Member{Name: name, Field: sf, Value: v.Field(i)})
	}
	return out
}

// byName is Members by name, and the names in field order.
func byName(v reflect.Value) (map[string]reflect.Value, []string) {
	fields := map[string]reflect.Value{}
	var names []string
	for _, m := range Members(v) {
		fields[m.Name] = m.Value
		names = append(names, m.Name)
	}
	return fields, names
}

// value decodes raw into v, the member at path.
func value(raw []byte, path string, v reflect.Value, hint Hint) error {
	if string(raw) == "null" {
		// As encoding/json: null leaves a value as it is, and makes a
		// pointer, map or slice nil. The owner refuses null where that
		// would open more than meant.
		return json.Unmarshal(raw, v.Addr().Interface())
	}
	if u, ok := v.Addr().Interface().(json.Unmarshaler); ok && v.Kind() == reflect.Struct {
		err := u.UnmarshalJSON(raw)
		var own *Error
		if err != nil && !errors.As(err, &own) {
			err = &Error{Path: path, Msg: err.Error()}
		}
		return err
	}
	_, custom := v.Addr().Interface().(json.Unmarshaler)
	switch {
	case custom, v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		// Its own JSON method (caddy.Duration's), or raw JSON: whole.
	case v.Kind() == reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			break
		}
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entries); err != nil {
			return &Error{Path: path, Msg: `not an object: write {"<name>": …}`}
		}
		m := reflect.MakeMapWithSize(v.Type(), len(entries))
		for _, k := range sortedKeys(entries) {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := value(bytes.TrimSpace(entries[k]), join(path, k), e, hint); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
		return nil
	case v.Kind() == reflect.Struct:
		// A struct of options (a network's, one of its servers): member
		// by member too, so that a misspelt one is refused.
		_, err := Object(raw, path, v.Addr().Interface(), hint)
		return err
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct &&
		!v.Type().Implements(unmarshalerType):
		p := reflect.New(v.Type().Elem())
		if _, err := Object(raw, path, p.Interface(), hint); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct:
		// A struct with a JSON method of its own behind a pointer (a
		// server of the statusgate app, its defaults): its errors name
		// its members, under path, not the whole object.
		p := reflect.New(v.Type().Elem())
		if err := p.Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			var own *Error
			if errors.As(err, &own) {
				return &Error{Path: join(path, own.Path), Msg: own.Msg}
			}
			return &Error{Path: path, Msg: err.Error()}
		}
		v.Set(p)
		return nil
	case v.Kind() == reflect.Slice:
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			// Not shown: it may be a key written where the list goes.
			return &Error{Path: path, Msg: "not a list: write […]"}
		}
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, el := range elems {
			if err := value(bytes.TrimSpace(el), path+"["+strconv.Itoa(i)+"]", s.Index(i), hint); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return &Error{Path: path, Msg: shown(raw) + " is not " + want(v.Type(), err) + hintOf(hint, path)}
	}
	return nil
}

var (
	durationType    = reflect.TypeFor[caddy.Duration]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// want says what a value of type t is, for the message about one that is not.
func want(t reflect.Type, err error) string {
	if t == durationType {
		return `a duration: write one in Caddy's syntax, such as "2s" or "1m30s" (a number is nanoseconds)`
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
		return "a whole number"
	case reflect.Int64:
		return "a size in bytes: write a whole number of bytes, such as 16777216 (16 MiB)"
	case reflect.String:
		return `a string: write it in quotes, "…"`
	}
	var u interface{ Unwrap() error }
	if errors.As(err, &u) && u.Unwrap() != nil {
		err = u.Unwrap()
	}
	return "valid here (" + err.Error() + ")"
}

func hintOf(hint Hint, path string) string {
	if hint == nil {
		return ""
	}
	if h := hint(path); h != "" {
		return ", or " + h
	}
	return ""
}

// suggestion is the end of the message for an unknown member: the nearest
// option's name, or the list of them.
func suggestion(name string, names []string, path string) string {
	if s := nearest.Suggest(name, names); s != "" {
		return s
	}
	return fmt.Sprintf(" (the options of %s: %s)", orTop(path), strings.Join(names, ", "))
}

// shown is a value as it was written, cut short if long.
func shown(raw []byte) string {
	const most = 64
	s := string(bytes.TrimSpace(raw))
	if len(s) > most {
		s = s[:most] + "…"
	}
	return s
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orTop(path string) string {
	if path == "" {
		return "the handler"
	}
	return path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Zeros lists, in name order, the members of given (as Object returns them)
// whose values in the struct v points to are a number's or a string's zero:
// written, but the same as leaving them out, which the owner may refuse as
// a guess at what was meant.
func Zeros(v any, given map[string]string) []string {
	fields, _ := byName(reflect.ValueOf(v).Elem())
	var zeros []string
	for _, name := range sortedKeys(given) {
		f, ok := fields[name]
		if !ok {
			continue
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.String:
			if f.IsZero() {
				zeros = append(zeros, name)
			}
		}
	}
	return zeros
}
