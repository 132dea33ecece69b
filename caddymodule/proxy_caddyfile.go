package caddymodule

// This file is the Caddyfile's proxy segment: the upstreams on a statusgate
// (or network server) line and the proxy block's reverse_proxy
// subdirectives, read into the reverse_proxy handler's JSON.

import (
	"encoding/json"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// proxySegment reads a proxy block: its tokens, braces included, checked
// for what a statusgate backend cannot have.
func proxySegment(d *caddyfile.Dispenser) (caddyfile.Segment, error) {
	if d.CountRemainingArgs() > 0 {
		d.NextArg()
		return nil, d.Errf("proxy: '%s': the upstreams go on the statusgate line (statusgate <upstream>... {), or in proxy's block as to <upstream>...", d.Val())
	}
	seg := d.NextSegment()
	if err := refuseAnswering(seg); err != nil {
		return nil, err
	}
	return seg, nil
}

// refuseAnswering checks the block of the segment seg (a word, then a
// block of reverse_proxy subdirectives) for what a statusgate backend
// cannot have: what would answer in the backend's place.
func refuseAnswering(seg caddyfile.Segment) error {
	pd := caddyfile.NewDispenser(seg)
	pd.Next()
	for pd.NextBlock(0) {
		opt := pd.Val()
		switch {
		case opt == "handle_response", opt == "replace_status", strings.HasPrefix(opt, "@"):
			return pd.Errf("%s: '%s' is not allowed here: statusgate reads the backend's answer itself (the field layer, the cache, shared trips), so nothing may answer in its place", seg[0].Text, opt)
		}
	}
	return nil
}

// parseProxy reads the backend a statusgate line declares, its upstreams
// and its proxy block, with reverse_proxy's own parser, into the JSON of
// the reverse_proxy handler (without "handler"). directive is the
// statusgate token, which errors about the upstreams point to.
func parseProxy(directive caddyfile.Token, upstreams []caddyfile.Token, block caddyfile.Segment) (json.RawMessage, error) {
	head := directive
	head.Text = "reverse_proxy"
	tokens := append([]caddyfile.Token{head}, upstreams...)
	if len(block) > 1 {
		// The block without the word proxy, opened on the line of the
		// upstreams, where reverse_proxy's parser looks for it.
		open := block[1]
		open.File, open.Line = head.File, head.Line
		tokens = append(append(tokens, open), block[2:]...)
	}
	rp := new(reverseproxy.Handler)
	if err := rp.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
		return nil, err
	}
	if len(rp.Upstreams) == 0 && rp.DynamicUpstreamsRaw == nil {
		return nil, errAt(directive, "statusgate: a proxy block without upstreams: name the game server, as in statusgate 127.0.0.1:8080 { ... }, or with to or dynamic in the proxy block")
	}
	return json.Marshal(rp)
}
