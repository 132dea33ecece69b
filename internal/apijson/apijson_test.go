package apijson

import (
	"net/http/httptest"
	"testing"
)

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:          `"plain"`,
		`q"b\`:           `"q\"b\\"`,
		"a\nb\tc\r\b\f":  `"a\nb\tc\r\b\f"`,
		"\x01\x1f":       `"\u0001\u001f"`,
		"</script>":      `"</script>"`,
		"/api → /api/v1": `"/api → /api/v1"`,
		"§bAlexie":       `"§bAlexie"`,
		"bad\xffbyte":    "\"bad\uFFFDbyte\"",
		"a\u2028b\u2029": `"a\u2028b\u2029"`,
	} {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
}

func TestAppendError(t *testing.T) {
	for _, tc := range []struct {
		server, want string
	}{
		{"", `{"ok":false,"error":{"status":404,"message":"Not found","path":"/api/v1/a\"b"},"meta":{"version":"v1","updatedAt":1784300000000}}`},
		{"global", `{"ok":false,"error":{"status":404,"message":"Not found","path":"/api/v1/a\"b"},"meta":{"version":"v1","server":"global","updatedAt":1784300000000}}`},
	} {
		if got := string(AppendError([]byte("x"), 404, "Not found", `/api/v1/a"b`, tc.server, 1784300000000)); got != "x"+tc.want {
			t.Errorf("server %q:\n got %s\nwant x%s", tc.server, got, tc.want)
		}
	}
}

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, 503, []byte(`{}`))
	if rec.Code != 503 || rec.Body.String() != `{}` {
		t.Fatalf("got %d %q", rec.Code, rec.Body)
	}
	for name, want := range map[string]string{
		"Content-Type":                "application/json; charset=utf-8",
		"X-Content-Type-Options":      "nosniff",
		"Cache-Control":               "no-store",
		"Access-Control-Allow-Origin": "*",
		"Content-Length":              "2",
	} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
