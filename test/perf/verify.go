package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// decodeJSON parses a whole document, keeping numbers as their text.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("data after the top-level value")
	}
	return v, nil
}

// stripNames removes members named in names from v at any depth, and reports
// each name it removed.
func stripNames(v any, names map[string]bool, removed map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if names[k] {
				delete(x, k)
				removed[k] = true
				continue
			}
			x[k] = stripNames(e, names, removed)
		}
	case []any:
		for i, e := range x {
			x[i] = stripNames(e, names, removed)
		}
	}
	return v
}

// filteredView is what the field layer must make of a backend document for a
// caller without a key: names removed everywhere but in the top-level meta,
// meta.authenticated false, and meta.hiddenFields listing what was removed (in
// the order of names) when anything was.
func filteredView(backendBody []byte, names []string) (any, error) {
	v, err := decodeJSON(backendBody)
	if err != nil {
		return nil, err
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("backend body is not an object")
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	removed := map[string]bool{}
	for k, e := range doc {
		if k != "meta" {
			doc[k] = stripNames(e, set, removed)
		}
	}
	meta, _ := doc["meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		doc["meta"] = meta
	}
	meta["authenticated"] = false
	var hidden []any
	for _, n := range names {
		if removed[n] {
			hidden = append(hidden, n)
		}
	}
	if hidden != nil {
		meta["hiddenFields"] = hidden
	}
	return doc, nil
}

// checkPassThrough: a response that must carry the backend's bytes untouched.
func checkPassThrough(status int, got, backendBody []byte) error {
	if status != 200 {
		return fmt.Errorf("status %d, want 200: %.200s", status, got)
	}
	if !bytes.Equal(got, backendBody) {
		return fmt.Errorf("body differs from the backend's (%d bytes, backend %d): %.200s", len(got), len(backendBody), got)
	}
	return nil
}

// checkFiltered: a statusgate response to a caller without a key must be
// valid JSON, carry no protected member outside the top-level meta, and equal
// the backend's document with exactly those members removed and meta adjusted.
func checkFiltered(status int, got, backendBody []byte, names []string) error {
	if status != 200 {
		return fmt.Errorf("status %d, want 200: %.200s", status, got)
	}
	scan, err := scanKeys(bytes.NewReader(got), names)
	if err != nil {
		return fmt.Errorf("scanning the body: %v", err)
	}
	if n := scan.leaked(); n > 0 {
		return fmt.Errorf("%d protected members leaked: %v", n, scan.Protected)
	}
	gotDoc, err := decodeJSON(got)
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	want, err := filteredView(backendBody, names)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(gotDoc, want) {
		gm, _ := gotDoc.(map[string]any)
		wm, _ := want.(map[string]any)
		return fmt.Errorf("filtered document differs from the backend's minus %v (meta %v, want %v)", names, gm["meta"], wm["meta"])
	}
	return nil
}

// checkKeyed additionally makes sure the keyed sample really has the protected
// members, so that the pass-through check cannot pass on a body without them.
func checkKeyed(body []byte, names []string, wantProtected bool) error {
	scan, err := scanKeys(bytes.NewReader(body), names)
	if err != nil {
		return err
	}
	if wantProtected {
		for _, n := range names {
			if scan.Protected[n] == 0 {
				return fmt.Errorf("keyed response lacks %q", n)
			}
		}
	}
	return nil
}
