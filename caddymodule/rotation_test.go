package caddymodule

import (
	"context"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// Secrets of the key being rotated in these tests: the old one, written
// plain, and the new one, written as its digest.
const (
	rotateOld = "old-b0t-secret-0123456789"
	rotateNew = "new-b0t-secret-0123456789"
)

// rotationBlock is a key in the middle of a rotation: two secrets under the
// name bot, with one scope and one cap, and another key between them.
var rotationBlock = "statusgate {\n" +
	"\tkey bot " + rotateOld + " {\n\t\tendpoints status bans\n\t\tmax_in_flight 1\n\t}\n" +
	"\tkey web " + scopeWebSecret + "\n" +
	"\tkey bot " + apikey.Digest(rotateNew) + " {\n\t\tendpoints bans status\n\t\tmax_in_flight 1\n\t}\n" +
	"\tcoalesce off\n}"

// TestRotationIsOneKey checks that the secrets of one name are one key:
// each opens what the key opens and nothing more, both are named bot in the
// placeholders and the metrics (one series, counting both), and the key's
// cap counts the requests of both secrets together.
func TestRotationIsOneKey(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	h := provisionIn(t, ctx, rotationBlock)
	if h.keys.Len() != 2 {
		t.Fatalf("%d keys, want 2 (bot with two secrets, web)", h.keys.Len())
	}
	ok := &backend{body: `{"ok":true,"data":{},"meta":{}}`}
	for _, secret := range []string{rotateOld, rotateNew} {
		next := &seenBy{next: ok}
		if r := serve(t, h, next, "GET", "/api/v1/bans", keyHeader(secret)); r.Code != 200 {
			t.Errorf("bans, in the key's scope: %d, want 200", r.Code)
		}
		if next.seen[placeholderKey] != "bot" || next.seen[placeholderClient] != "bot" {
			t.Errorf("placeholders key %q, client %q; want bot for both secrets", next.seen[placeholderKey], next.seen[placeholderClient])
		}
		if r := serve(t, h, ok, "GET", "/api/v1/server", keyHeader(secret)); r.Code != 404 {
			t.Errorf("server, outside the key's scope: %d, want the disguised 404", r.Code)
		}
	}

	// The cap is the key's, whichever secret its callers present.
	g := newGate()
	done := make(chan int, 1)
	go func() { done <- serve(t, h, g, "GET", "/api/v1/bans?n=1", keyHeader(rotateOld)).Code }()
	<-g.entered
	if r := serve(t, h, ok, "GET", "/api/v1/bans?n=2", keyHeader(rotateNew)); r.Code != 429 {
		t.Errorf("the new secret while the old one's request is open, cap 1: %d, want 429", r.Code)
	}
	g.release <- struct{}{}
	if c := <-done; c != 200 {
		t.Errorf("the old secret's request: %d", c)
	}

	got := scrapeStatusgate(t, ctx.GetMetricsRegistry())
	for series, want := range map[string]float64{
		`caddy_http_statusgate_key_requests_total{key="bot"}`: 6,
		`caddy_http_statusgate_key_refused_total{key="bot"}`:  2,
		`caddy_http_statusgate_key_requests_total{key="web"}`: 0,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}

// TestRotationFromJSON checks the same key written in JSON: two objects of
// one name are one key; their scopes must agree.
func TestRotationFromJSON(t *testing.T) {
	h := mustProvision(t, `{"auth":{"keys":[`+
		`{"name":"bot","key":"`+rotateOld+`","endpoints":["bans"]},`+
		`{"name":"bot","key":"`+apikey.Digest(rotateNew)+`","endpoints":["bans"]}]}}`)
	for _, secret := range []string{rotateOld, rotateNew} {
		if r := serve(t, h, &backend{body: playerBody}, "GET", "/api/v1/bans", keyHeader(secret)); r.Code != 200 {
			t.Errorf("bans: %d, want 200", r.Code)
		}
	}
	if len(h.keyInfo) != 1 || h.keyInfo[0].name != "bot" {
		t.Errorf("keys %+v, want one, bot", h.keyInfo)
	}
}
