package caddymodule

import (
	"net/url"
	"strings"
	"testing"
)

// TestUpstreamQuery: each endpoint's query reaches the backend as the
// backend reads it, and nothing else does: the flags wherever and however
// they are spelled, the last pair of each parameter as written, a custom
// station's whole query but the key.
func TestUpstreamQuery(t *testing.T) {
	table, _, err := buildTable(tableConfig{authOn: true, enabled: map[string]bool{"custom/votes": true}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ endpoint, in, want string }{
		{"status", "", ""},
		{"status", "c=123", ""},
		{"status", "c=1&c=2&key=k", ""},
		{"status", "history=true", "history=true"},
		{"status", "c=9&history=true&d=1", "history=true"},
		{"status", "history=true&history=false", "history=true"},
		{"status", "history=false&history=true", "history=true"},
		// Decoded before it is split, as the backend does: these count.
		{"status", "history%3Dtrue", "history=true"},
		{"status", "%68istory=tru%65", "history=true"},
		{"status", "c=%26history=true", "history=true"},
		{"status", "history=true%26x", "history=true"},
		// Exact and case-sensitive, '+' is not a space: these do not.
		{"status", "history=TRUE", ""},
		{"status", "History=true", ""},
		{"status", "history", ""},
		{"status", "history=1", ""},
		{"status", "history=true+", ""},
		{"status", "history= true", ""},
		{"status", "xhistory=true", ""},
		{"status", "detailed=true", ""},
		{"player", "detailed=true&history=true&n=1", "detailed=true"},
		{"player", "detailed%3dtrue", "detailed=true"},
		{"punishments", "view=html&c=1", "view=html"},
		{"punishments", "view=HTML", ""},
		{"server", "history=true&detailed=true&n=1", ""},
		{"bans", "k%65y=secret&n=%41", ""},
		// Split first, names decoded as a form's; the last of each counts
		// and is sent as written; the order is the table's.
		{"placeholders", "uuid=a&p=x", "uuid=a&p=x"},
		{"placeholders", "p=x&uuid=a", "uuid=a&p=x"},
		{"placeholders", "p=x&p=y&uuid=a&c=1", "uuid=a&p=y"},
		{"placeholders", "p=%25player_name%25&%70=%25vault%25&uuid=a", "uuid=a&%70=%25vault%25"},
		{"placeholders", "p=x&P=y&UUID=b&uuid=a", "uuid=a&p=x"},
		{"placeholders", "p+=y&p=x", "p=x"},
		{"placeholders", "p=x&list=true&key=k", "p=x&list=true"},
		{"placeholders", "uuid&p", "uuid&p"},
		{"placeholders", "c=1&d=2", ""},
		{"custom/votes", "page=2&key=k&k%65y=k&c=1", "page=2&c=1"},
		{"custom/votes", "c=1", "c=1"},
	} {
		ep := table.byName[c.endpoint]
		if got := upstreamQuery(ep, c.in); got != c.want {
			t.Errorf("%s?%s: the backend gets %q, want %q", c.endpoint, c.in, got, c.want)
		}
	}
}

// TestUpstreamQueryAgreesWithTheBackend: whatever the client sends, what
// the backend reads of the query it gets is what it would have read of the
// client's, for the flags and the parameters alike (the backend's reading
// written out here as the backend does it), and nothing else is sent.
func TestUpstreamQueryAgreesWithTheBackend(t *testing.T) {
	table, _, err := buildTable(tableConfig{authOn: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The backend's flags: the query decoded, split on '&'.
	flag := func(raw, f string) bool {
		dec, err := url.PathUnescape(raw)
		if err != nil {
			t.Fatalf("%q does not decode", raw)
		}
		for _, el := range strings.Split(dec, "&") {
			if el == f {
				return true
			}
		}
		return false
	}
	// The backend's parameters: split on '&', name and value decoded as a
	// form's, the last one wins.
	param := func(raw, name string) (string, bool) {
		v, found := "", false
		for _, pair := range strings.Split(raw, "&") {
			n, val, _ := strings.Cut(pair, "=")
			dn, err1 := url.QueryUnescape(n)
			dv, err2 := url.QueryUnescape(val)
			if err1 != nil || err2 != nil {
				t.Fatalf("%q does not decode", pair)
			}
			if dn == name {
				v, found = dv, true
			}
		}
		return v, found
	}
	pieces := []string{"history=true", "history%3Dtrue", "x=%26history=true", "History=true", "detailed=true",
		"p=a", "p=b", "%70=c", "p+=d", "uuid=u1", "uuid=%75", "UUID=u3", "list=true", "key=k", "c=1", "", "p", "view=html"}
	for _, ep := range []string{"status", "player", "placeholders", "punishments", "server"} {
		e := table.byName[ep]
		for _, a := range pieces {
			for _, b := range pieces {
				for _, c := range pieces {
					raw := a + "&" + b + "&" + c
					got := upstreamQuery(e, raw)
					for _, f := range []string{"history=true", "detailed=true", "view=html"} {
						want := flag(raw, f) && strings.Contains(strings.Join(e.query.flags, " "), f)
						if flag(got, f) != want {
							t.Errorf("%s?%s: the backend gets %q, which has %s: %v, want %v", ep, raw, got, f, !want, want)
						}
					}
					for _, name := range []string{"uuid", "p", "list", "key", "c"} {
						wv, wok := param(raw, name)
						if !strings.Contains(" "+strings.Join(e.query.params, " ")+" ", " "+name+" ") {
							wv, wok = "", false
						}
						if gv, gok := param(got, name); gv != wv || gok != wok {
							t.Errorf("%s?%s: the backend gets %q, which reads %s as %q (%v), want %q (%v)", ep, raw, got, name, gv, gok, wv, wok)
						}
					}
				}
			}
		}
	}
}
