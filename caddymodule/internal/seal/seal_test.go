package seal

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy/fastcgi"
)

const secret = "kA-7f3c9e1d5b2a4c68e0f1+/="

func TestHolds(t *testing.T) {
	secrets := []string{secret}
	for _, v := range []string{
		secret,
		"x=" + url.QueryEscape(secret),
		url.PathEscape(secret),
		url.QueryEscape(url.QueryEscape("key=" + secret)),
		"%zz " + url.QueryEscape(secret), // a stray % before it
	} {
		if !Holds(v, secrets) {
			t.Errorf("Holds(%q) = false", v)
		}
	}
	for _, v := range []string{"", "kA-7f3c9e1d5b2a4c68e0f1", "/api/v1/status", "%%%"} {
		if Holds(v, secrets) {
			t.Errorf("Holds(%q) = true", v)
		}
	}
}

// roundTripFunc is a transport that says it was asked.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var errSent = errors.New("sent")

func TestTransportRefuses(t *testing.T) {
	sent := Transport{roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errSent })}
	for name, mod := range map[string]func(r *http.Request){
		"path":   func(r *http.Request) { r.URL.Path = "/api/" + secret },
		"query":  func(r *http.Request) { r.URL.RawQuery = "x=" + url.QueryEscape(secret) },
		"Host":   func(r *http.Request) { r.Host = url.QueryEscape("key=" + secret) },
		"header": func(r *http.Request) { r.Header.Set("X-A", secret) },
	} {
		r := httptest.NewRequest("GET", "http://backend/api/v1/status", nil)
		mod(r)
		r = r.WithContext(With(r.Context(), []string{secret}))
		if _, err := sent.RoundTrip(r); !errors.As(err, new(Leak)) {
			t.Errorf("%s: %v, want a Leak", name, err)
		}
		// Without the caller's secrets (a refresh, a caller without a key):
		// nothing to check.
		r = r.WithContext(With(r.Context(), nil))
		r = httptest.NewRequest("GET", "http://backend/api/v1/status", nil)
		if _, err := sent.RoundTrip(r); err != errSent {
			t.Errorf("%s: %v, want the request sent", name, err)
		}
	}
}

// TestTransportFastCGIParams: the FastCGI transport's env, with its
// placeholders replaced, is checked before anything is dialed.
func TestTransportFastCGIParams(t *testing.T) {
	ft := &fastcgi.Transport{EnvVars: map[string]string{"FORWARDED": "{http.request.header.X-Copy}"}}
	r := httptest.NewRequest("GET", "http://backend/index.php", nil)
	r.Header.Set("X-Copy", "") // what the request sends is clean
	repl := caddy.NewReplacer()
	r = caddyhttp.PrepareRequest(r, repl, nil, &caddyhttp.Server{})
	repl.Set("http.request.header.X-Copy", secret) // the value a param is made of is not
	r = r.WithContext(With(r.Context(), []string{secret}))
	_, err := Transport{ft}.RoundTrip(r)
	var leak Leak
	if !errors.As(err, &leak) || string(leak) != "FastCGI parameter FORWARDED" {
		t.Fatalf("%v, want the FastCGI parameter refused", err)
	}
}

// FuzzHolds writes a secret into a value the ways a config can (as it is,
// query- or path-escaped, twice escaped) between any bytes: Holds must find
// it, and a value made without it must not hold it unless its bytes spell
// the secret.
func FuzzHolds(f *testing.F) {
	f.Add("kA-7f3c9e1d5b2a4c68e0f1", "x=", "&y", uint8(0))
	f.Add("a+b/c=d%e", "/api/", "", uint8(1))
	f.Add("k3y 0123456789", "%", "%zz", uint8(2))
	f.Add("++%%", "key=", "+", uint8(3))
	f.Fuzz(func(t *testing.T, secret, before, after string, how uint8) {
		if secret == "" {
			return
		}
		escapes := []func(string) string{
			func(s string) string { return s },
			url.QueryEscape,
			url.PathEscape,
			func(s string) string { return url.QueryEscape(url.QueryEscape(s)) },
			func(s string) string { return url.QueryEscape(url.PathEscape(s)) },
		}
		written := escapes[int(how)%len(escapes)](secret)
		// Bytes around it that decode into one with it (a '%' before its
		// first hex digits) are the fuzzer's, not a config's: keep them
		// plain.
		plain := func(s string) string { return strings.NewReplacer("%", "", "+", "").Replace(s) }
		v := plain(before) + written + plain(after)
		if !Holds(v, []string{secret}) {
			t.Fatalf("Holds(%q) = false for the secret %q written %q", v, secret, written)
		}
	})
}

// BenchmarkInRequest is the check of a keyed trip's request as the
// declared backend's transport gets it.
func BenchmarkInRequest(b *testing.B) {
	r := httptest.NewRequest("GET", "http://127.0.0.1:8080/api/v1/status", nil)
	for k, v := range map[string]string{"Accept-Encoding": "identity", "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36",
		"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "localhost:8080", "X-Forwarded-Proto": "http", "Via": "1.1 Caddy",
		"Accept": "application/json", "Accept-Language": "en-GB,en;q=0.9"} {
		r.Header.Set(k, v)
	}
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	secrets := []string{secret}
	b.ReportAllocs()
	for b.Loop() {
		if InRequest(r, secrets) != "" {
			b.Fatal("found")
		}
	}
}
