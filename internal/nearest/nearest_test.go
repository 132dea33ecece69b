package nearest

import "testing"

var options = []string{"auth", "key", "allow_query_key", "hide_protected", "require_key", "max_in_flight", "max_main_thread",
	"max_per_client", "max_streams", "max_streams_per_client", "stream_heartbeat", "timeout", "write_timeout", "cache", "cache_size"}

func TestWord(t *testing.T) {
	for _, c := range []struct{ w, want string }{
		{"max_inflight", "max_in_flight"},
		{"max-in-flight", "max_in_flight"},
		{"MAX_IN_FLIGHT", "max_in_flight"},
		{"keys", "key"},
		{"auht", "auth"}, // two letters swapped: one edit
		{"hide_protect", "hide_protected"},
		{"max_stream", "max_streams"},
		{"max_streams_per_clients", "max_streams_per_client"},
		{"stream_hearbeat", "stream_heartbeat"},
		{"timout", "timeout"},
		{"cache_sise", "cache_size"},
	} {
		if got, ok := Word(c.w, options); !ok || got != c.want {
			t.Errorf("Word(%q) = %q, %v; want %q", c.w, got, ok, c.want)
		}
	}
	for _, w := range []string{"bogus", "heartbeat", "x", "", "max_in_flight", "zzzzzzzzzzzz"} {
		if got, ok := Word(w, options); ok {
			t.Errorf("Word(%q) = %q, want no suggestion", w, got)
		}
	}
	if got, ok := Word("stats", []string{"index", "status", "player", "server", "plugins"}); !ok || got != "status" {
		t.Errorf("Word(stats) = %q, %v; want status", got, ok)
	}
}

func TestSuggest(t *testing.T) {
	if got := Suggest("max_inflight", options); got != "; did you mean max_in_flight?" {
		t.Errorf("Suggest = %q", got)
	}
	if got := Suggest("bogus", options); got != "" {
		t.Errorf("Suggest(bogus) = %q, want nothing", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"abc", "acb", 1}, {"ca", "abc", 3},
	} {
		if d := distance(c.a, c.b); d != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
		if d := distance(c.b, c.a); d != c.d {
			t.Errorf("distance(%q, %q) = %d, want %d", c.b, c.a, d, c.d)
		}
	}
}
