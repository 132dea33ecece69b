package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/statusgate/statusgate/internal/fixture"
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

// filteredView is what the field layer must make of a backend document for a
// caller without a key: names removed everywhere but in the top-level meta,
// meta.authenticated false, and meta.hiddenFields listing what was removed (in
// the order of names) when anything was.
func filteredView(backendBody []byte, names []string) (any, error) {
	return fixture.FilteredValue(backendBody, names)
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
