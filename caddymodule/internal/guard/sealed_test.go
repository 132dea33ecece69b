package guard

import (
	"errors"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/seal"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// TestTicketSealed: a trip for a caller is refused when the request or a
// value of the declared backend's placeholders it picked (which a refresh
// for other callers would send again) holds the key it presented, and
// goes when nothing does or the caller presented none.
func TestTicketSealed(t *testing.T) {
	const key = "kA-7f3c9e1d5b2a4c68e0f1"
	r := httptest.NewRequest("GET", "/api/v1/status", nil)
	for _, tc := range []struct {
		name    string
		t       Ticket
		refused bool
	}{
		{"nothing holds it", Ticket{Secrets: []string{key}, Upstream: upstream.Values{"http.request.host", "survival.test"}}, false},
		{"no key presented", Ticket{Upstream: upstream.Values{"x", key}}, false},
		{"a picked value", Ticket{Secrets: []string{key}, Upstream: upstream.Values{"http.vars.host", "key%3D" + url.QueryEscape(key)}}, true},
	} {
		err := tc.t.sealed(r)
		if got := errors.As(err, new(seal.Leak)); got != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
	hr := httptest.NewRequest("GET", "/api/v1/status", nil)
	hr.Header.Set("Cookie", "apikey="+key)
	if err := (&Ticket{Secrets: []string{key}}).sealed(hr); !errors.As(err, new(seal.Leak)) {
		t.Errorf("a header holding the key: %v, want refused", err)
	}
}
