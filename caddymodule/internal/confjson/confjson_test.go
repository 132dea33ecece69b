package confjson

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

type inner struct {
	Wait caddy.Duration `json:"wait,omitempty"`
}

type named struct{ Name string }

// UnmarshalJSON refuses an empty name, as a type with a method of its own
// (apikey.Key) does.
func (n *named) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil || s == "" {
		return errors.New("want a name")
	}
	n.Name = s
	return nil
}

// group and part are objects of options without a JSON method of their
// own (a network, its servers).
type group struct {
	Name string `json:"name"`
}

type part struct {
	ID string `json:"id"`
}

type config struct {
	Limit   int                       `json:"limit,omitempty"`
	Size    int64                     `json:"size,omitempty"`
	On      *bool                     `json:"on,omitempty"`
	Label   string                    `json:"label,omitempty"`
	Times   map[string]caddy.Duration `json:"times,omitempty"`
	Names   []named                   `json:"names,omitempty"`
	Raw     json.RawMessage           `json:"raw,omitempty"`
	Group   *group                    `json:"group,omitempty"`
	Parts   []part                    `json:"parts,omitempty"`
	hidden  int
	inner       // its members are this object's
	Skipped int `json:"-"`
}

func decode(t *testing.T, in string) (config, map[string]string, error) {
	t.Helper()
	var c config
	given, err := Object([]byte(in), "backend", &c, func(path string) string {
		if path == "backend.limit" {
			return "-1 for off"
		}
		return ""
	})
	return c, given, err
}

func TestObject(t *testing.T) {
	c, given, err := decode(t, `{"limit": 3, "size": 1024, "on": false, "label": "x", "times": {"a": "2s", "b": 5},
		"names": ["bot"], "raw": {"any": [1, 2]}, "wait": "1m", "group": {"name": "main"}, "parts": [{"id": "a"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	f := false
	want := config{Limit: 3, Size: 1024, On: &f, Label: "x", Times: map[string]caddy.Duration{"a": caddy.Duration(2e9), "b": 5},
		Names: []named{{"bot"}}, Raw: json.RawMessage(`{"any": [1, 2]}`), Group: &group{Name: "main"}, Parts: []part{{ID: "a"}},
		inner: inner{Wait: caddy.Duration(60e9)}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("decoded %+v,\nwant %+v", c, want)
	}
	if len(given) != 10 || given["limit"] != "3" || given["wait"] != `"1m"` {
		t.Errorf("given %v", given)
	}
}

func TestObjectErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"limt": 3}`:                           "backend.limt: unknown option; did you mean limit?",
		`{"zzzzzz": 3}`:                         "backend.zzzzzz: unknown option (the options of backend: limit, size, on, label, times, names, raw, group, parts, wait)",
		`{"group": {"nme": "x"}}`:               "backend.group.nme: unknown option; did you mean name?",
		`{"parts": [{"id": "a"}, {"di": "b"}]}`: "backend.parts[1].di: unknown option; did you mean id?",
		`{"hidden": 3}`:                         "backend.hidden: unknown option",
		`{"Skipped": 3}`:                        "backend.Skipped: unknown option",
		`{"LIMIT": 3}`:                          "backend.LIMIT: unknown option; did you mean limit?",
		`{"limit": "3"}`:                        `backend.limit: "3" is not a whole number, or -1 for off`,
		`{"limit": 1.5}`:                        `backend.limit: 1.5 is not a whole number, or -1 for off`,
		`{"size": "1MiB"}`:                      `backend.size: "1MiB" is not a size in bytes: write a whole number of bytes, such as 16777216 (16 MiB)`,
		`{"on": "yes"}`:                         `backend.on: "yes" is not true or false`,
		`{"label": 5}`:                          `backend.label: 5 is not a string: write it in quotes, "…"`,
		`{"wait": "5sec"}`:                      `backend.wait: "5sec" is not a duration: write one in Caddy's syntax, such as "2s" or "1m30s" (a number is nanoseconds)`,
		`{"times": {"a": "1", "b": 2}}`:         `backend.times.a: "1" is not a duration`,
		`{"times": [1]}`:                        `backend.times: not an object: write {"<name>": …}`,
		`{"names": ["bot", ""]}`:                `backend.names[1]: want a name`,
		`{"names": "secret"}`:                   `backend.names: not a list: write […]`,
		`[1, 2]`:                                `backend: not an object of options: write {…}`,
	} {
		_, _, err := decode(t, in)
		var e *Error
		if err == nil || err.Error() != want && !strings.HasPrefix(err.Error(), want) || !errors.As(err, &e) {
			t.Errorf("%s: %v,\nwant %q", in, err, want)
		}
	}
	// The top object has no path of its own.
	var c config
	if _, err := Object([]byte(`{"lmit": 1}`), "", &c, nil); err == nil || err.Error() != "lmit: unknown option; did you mean limit?" {
		t.Errorf("top: %v", err)
	}
}

// A long value is cut short in the message.
func TestObjectShowsLongValuesCut(t *testing.T) {
	_, _, err := decode(t, `{"wait": "`+strings.Repeat("9", 100)+`x"}`)
	if err == nil || !strings.Contains(err.Error(), strings.Repeat("9", 63)+"…") || strings.Contains(err.Error(), strings.Repeat("9", 70)) {
		t.Errorf("%v", err)
	}
}

// null is what encoding/json makes of it, and not given.
func TestObjectNull(t *testing.T) {
	c, given, err := decode(t, `{"limit": null, "on": null, "times": null, "names": null}`)
	if err != nil || !reflect.DeepEqual(c, config{}) || len(given) != 0 {
		t.Errorf("%+v %v %v", c, given, err)
	}
}

// TestZeros lists the numbers and strings written as their zero.
func TestZeros(t *testing.T) {
	c, given, err := decode(t, `{"limit": 0, "size": 5, "label": "", "on": false, "wait": "0s", "times": {}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Zeros(&c, given), []string{"label", "limit", "wait"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Zeros = %v, want %v", got, want)
	}
}
