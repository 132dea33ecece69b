// Package fieldref is the field layer written with the packages the project
// was designed on: gjson validates a backend document and walks it to find the
// path of every protected member, sjson deletes the members by those paths one
// by one and rebuilds the top-level meta (docs/field-layer.md). It is the
// oracle the streaming filter (caddymodule/jsonfilter) is fuzzed against: it
// shares no code with the filter's scanner, nor with encoding/json, the other
// reference (internal/fixture).
//
// It is for tests only. sjson copies the document for every delete, so it is
// quadratic in the number of removals (seconds for one 2 MB
// record); it needs the whole body in memory; gjson.Valid recurses once per
// nesting level.
//
// Where a path cannot say which member it means, the oracle does not guess: it
// returns an *Inexpressible error and the caller falls back to another
// reference. That happens only for valid documents, in these cases:
//
//   - a protected member under an object member whose name (as gjson unescapes
//     it) occurs earlier in the same object: a gjson path resolves a name to
//     its first member, so `{"a":{"x":1},"a":{"op":1}}` has no path to the
//     second op. Duplicates of a protected name itself are fine: each delete
//     of the path takes the first that remains, and all of them go;
//   - a path that gjson does not resolve to the member the walk found, or
//     that sjson refuses or deletes from wrongly (each path is checked before
//     and after its delete). The one case known: a path that begins with two
//     empty names, `{"":{"":{"op":1}}}`, since a path starting with ".." is
//     gjson's JSON Lines syntax. Names with path syntax ('.', '*', '?', '#',
//     '@', '|', '!', brackets, a leading ':' ...) are escaped (escapePath)
//     and need no exception.
//
// Blanks are the one thing the two may place differently: sjson keeps the
// blanks before a removed member's comma and after its value, and drops
// those before and after the top-level object when it appends meta; the
// filter drops the blanks after a removed value, keeps those before the
// document, and drops a run longer than it holds before a key.
//
// Refusals mirror the filter's error kinds: ErrSyntax for what gjson.Valid
// rejects, ErrNotObject, ErrDepth and ErrMeta. gjson.Valid, like the filter,
// follows RFC 8259 as encoding/json.Valid does (the fuzz target checks that
// the three agree); gjson's Get and ForEach do not validate, which is why
// nothing is read before gjson.Valid has accepted the whole document.
package fieldref

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The refusals, for errors.Is; they match the filter's kinds of the same name.
var (
	ErrSyntax    = errors.New("fieldref: invalid JSON")
	ErrNotObject = errors.New("fieldref: top-level value is not an object")
	ErrDepth     = errors.New("fieldref: nesting too deep")
	ErrMeta      = errors.New("fieldref: unusable top-level meta")
)

// Refusal is a document the field layer must refuse. A valid document can
// have two problems at once (too deep and a bad meta); the streaming filter
// reports the one it meets first, so Kinds holds every problem found.
type Refusal struct {
	Kinds []error
	Msg   string
}

func (r *Refusal) Error() string   { return fmt.Sprintf("%v: %s", r.Kinds, r.Msg) }
func (r *Refusal) Unwrap() []error { return r.Kinds }

// Inexpressible is a valid document whose filtered form this oracle cannot
// compute with gjson paths and sjson deletes; Reason says why.
type Inexpressible struct{ Reason string }

func (e *Inexpressible) Error() string { return "fieldref: cannot express: " + e.Reason }

// Options are the filter's options that change its answer.
type Options struct {
	Authenticated bool // the value of meta.authenticated
	MaxDepth      int  // nesting limit, counted over the whole document, meta and removed members too; 0: none
}

// member is a protected member to delete: its path and where its value
// starts in the document, to check that the path leads there.
type member struct {
	path  string
	index int
}

// Filter is the field layer's answer to doc for a caller without a key:
// every member named in names removed at any depth outside the top-level meta
// (not looking inside removed values), and meta moved last, without its own
// hiddenFields and authenticated, ending with authenticated and, when
// something was removed, hiddenFields: the removed names in the order of
// names. hidden lists them too.
//
// Kept bytes are the input's, except the blanks around a removed member,
// which follow sjson's rule (blanks before the member's comma and after its
// value stay), and blanks before and after the top-level object, which sjson
// drops when it appends meta. On input without blanks between tokens the
// output is exact.
func Filter(doc []byte, names []string, opts Options) (out []byte, hidden []string, err error) {
	if !gjson.ValidBytes(doc) {
		return nil, nil, &Refusal{Kinds: []error{ErrSyntax}, Msg: "gjson.Valid rejects it"}
	}
	root := gjson.ParseBytes(doc)
	if !root.IsObject() {
		return nil, nil, &Refusal{Kinds: []error{ErrNotObject}, Msg: "the top-level value is not an object"}
	}

	// Every problem of a valid document, for the filter may meet either first.
	var kinds []error
	var msgs []string
	if opts.MaxDepth > 0 && depth(root, opts.MaxDepth) > opts.MaxDepth {
		kinds = append(kinds, ErrDepth)
		msgs = append(msgs, fmt.Sprintf("nested deeper than %d", opts.MaxDepth))
	}
	var meta gjson.Result
	metas := 0
	root.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "meta" {
			metas++
			meta = v
		}
		return true
	})
	switch {
	case metas > 1:
		kinds = append(kinds, ErrMeta)
		msgs = append(msgs, "duplicate top-level meta")
	case metas == 1 && !meta.IsObject():
		kinds = append(kinds, ErrMeta)
		msgs = append(msgs, "top-level meta is not an object")
	}
	if kinds != nil {
		return nil, nil, &Refusal{Kinds: kinds, Msg: strings.Join(msgs, "; ")}
	}

	// Walk: collect the protected members and check that each path leads to
	// the member gjson found it at.
	w := walker{names: names, found: map[string]bool{}}
	w.object(root, nil, true, gjson.Result{})
	if w.why != "" {
		return nil, nil, &Inexpressible{w.why}
	}
	for _, m := range w.members {
		if got := gjson.GetBytes(doc, m.path); got.Index != m.index {
			return nil, nil, &Inexpressible{fmt.Sprintf("gjson resolves the path %q to offset %d, not to the member at %d", m.path, got.Index, m.index)}
		}
	}

	// Delete, last member first: deleting an object member never moves an
	// array index, and deleting from the end leaves every earlier offset
	// where the walk found it.
	out = slices.Clone(doc)
	for _, m := range slices.Backward(w.members) {
		if out, err = deleteAt(out, m.path); err != nil {
			return nil, nil, err
		}
	}

	// meta: out of its place, its own hiddenFields and authenticated gone
	// (every duplicate), then appended last with the two set anew.
	m := "{}"
	if metas == 1 {
		m = meta.Raw
		if out, err = deleteAt(out, "meta"); err != nil {
			return nil, nil, err
		}
		for _, drop := range []string{"hiddenFields", "authenticated"} {
			for gjson.Get(m, drop).Exists() {
				if m, err = sjson.Delete(m, drop); err != nil {
					return nil, nil, &Inexpressible{"sjson: meta." + drop + ": " + err.Error()}
				}
			}
		}
	}
	if m, err = sjson.SetRaw(m, "authenticated", strconv.FormatBool(opts.Authenticated)); err != nil {
		return nil, nil, fmt.Errorf("fieldref: setting authenticated: %w", err)
	}
	for _, name := range names {
		if w.found[name] && !slices.Contains(hidden, name) {
			hidden = append(hidden, name)
			if m, err = sjson.Set(m, "hiddenFields.-1", name); err != nil {
				return nil, nil, fmt.Errorf("fieldref: appending to hiddenFields: %w", err)
			}
		}
	}
	if out, err = sjson.SetRawBytes(out, "meta", []byte(m)); err != nil {
		return nil, nil, fmt.Errorf("fieldref: appending meta: %w", err)
	}
	if !gjson.ValidBytes(out) {
		return nil, nil, fmt.Errorf("fieldref: sjson made invalid JSON: %q", out)
	}
	return out, hidden, nil
}

// deleteAt deletes the member at path with sjson and checks that exactly one
// member went: the document stays valid and the path resolves to something
// else afterwards (the next duplicate, or nothing).
func deleteAt(doc []byte, path string) ([]byte, error) {
	before := gjson.GetBytes(doc, path)
	out, err := sjson.DeleteBytes(doc, path)
	if err != nil {
		return nil, &Inexpressible{fmt.Sprintf("sjson cannot delete %q: %v", path, err)}
	}
	if !gjson.ValidBytes(out) || len(out) > len(doc)-len(before.Raw) {
		return nil, &Inexpressible{fmt.Sprintf("sjson deleted %q wrongly: %q", path, out)}
	}
	return out, nil
}

// walker collects the protected members of a document in document order.
type walker struct {
	names   []string
	found   map[string]bool
	members []member
	why     string // set when some member cannot be reached by a path
}

// object walks the members of an object value at path, the components of
// its own path (none for the top level). Protected members are recorded, not
// entered; the top-level meta is neither. shadow names the duplicated member
// the object lies in, if any: no path leads into it.
func (w *walker) object(obj gjson.Result, path []string, top bool, shadow gjson.Result) {
	first := map[string]int{} // name -> value offset of its first member
	obj.ForEach(func(k, v gjson.Result) bool {
		name := k.Str
		at, dup := first[name]
		if !dup {
			first[name] = v.Index
			at = v.Index
		}
		p := append(path[:len(path):len(path)], escapePath(name))
		switch {
		case top && name == "meta":
		case slices.Contains(w.names, name):
			if shadow.Exists() {
				w.why = fmt.Sprintf("the protected member at offset %d lies under %s, a duplicated name at offset %d: a gjson path leads to the first member of a name", k.Index, shadow.Raw, shadow.Index)
				return false
			}
			w.found[name] = true
			// A later duplicate is deleted by the same path, which
			// then leads to it: it must lead to the first now.
			w.members = append(w.members, member{strings.Join(p, "."), at})
		case dup && !shadow.Exists():
			w.value(v, p, k)
		default:
			w.value(v, p, shadow)
		}
		return w.why == ""
	})
}

// value walks a value at path.
func (w *walker) value(v gjson.Result, path []string, shadow gjson.Result) {
	switch {
	case v.IsObject():
		w.object(v, path, false, shadow)
	case v.IsArray():
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			w.value(e, append(path[:len(path):len(path)], strconv.Itoa(i)), shadow)
			i++
			return w.why == ""
		})
	}
}

// escapePath makes a member name one component of a gjson and sjson path:
// gjson.Escape puts a backslash before the path syntax of both ('.', '*',
// '?', '|', '#', '@', '!', brackets, quotes, backslash ...), and a leading
// ':' is escaped too, because sjson reads it as "force an object key" and
// drops it while gjson.Escape leaves ':' alone.
func escapePath(name string) string {
	s := gjson.Escape(name)
	if strings.HasPrefix(s, ":") {
		s = `\` + s
	}
	return s
}

// depth is the nesting depth of v, counting the containers as the filter's
// stack does (the top-level object is 1); past limit it stops looking and
// returns limit+1.
func depth(v gjson.Result, limit int) int {
	if !v.IsObject() && !v.IsArray() {
		return 0
	}
	d := 1
	if limit <= 0 {
		return d
	}
	v.ForEach(func(_, e gjson.Result) bool {
		d = max(d, 1+depth(e, limit-1))
		return d <= limit
	})
	return d
}
