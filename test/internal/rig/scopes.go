package rig

import (
	"bytes"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"testing"
)

// ScopedGateway is the example of docs/keys.md through a real Caddy: a Discord bot
// (keyA) that opens status and bans, a staff dashboard (keyB) that opens
// everything; extra lines go into the key block of the bot.
func ScopedGateway(be *Backend, botLines ...string) Gateway {
	bot := "key bot " + KeyA + " {\n\t\t\tendpoints status bans"
	for _, l := range botLines {
		bot += "\n\t\t\t" + l
	}
	return Gateway{Upstream: be.Addr(), Statusgate: []string{bot + "\n\t\t}", "key staff " + KeyB}}
}

// anyUpdatedAt matches the time in an envelope's meta, which the gateway's
// own error envelopes set to now.
var anyUpdatedAt = regexp.MustCompile(`"updatedAt":\d+`)

// WantSameAsAnonymous asserts that got, the answer to a key outside its
// scope, is byte for byte the anonymous answer: status, headers (but Date)
// and body (but the time of a gateway's own envelope).
func WantSameAsAnonymous(t *testing.T, target string, got, anon Response) {
	t.Helper()
	if got.Err != nil || anon.Err != nil {
		t.Errorf("%s: %v, %v", target, got.Err, anon.Err)
		return
	}
	norm := func(b []byte) []byte { return anyUpdatedAt.ReplaceAll(b, []byte(`"updatedAt":0`)) }
	hdr := func(h http.Header) http.Header { h = h.Clone(); h.Del("Date"); return h }
	if got.Status != anon.Status || !bytes.Equal(norm(got.Body), norm(anon.Body)) ||
		!maps.EqualFunc(hdr(got.Header), hdr(anon.Header), slices.Equal) {
		t.Errorf("%s: outside the key's scope\n%d %v\n%s\nanonymous\n%d %v\n%s",
			target, got.Status, got.Header, got.Body, anon.Status, anon.Header, anon.Body)
	}
}
