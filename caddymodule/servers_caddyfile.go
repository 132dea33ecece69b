package caddymodule

// This file is the Caddyfile's global statusgate option: the servers a
// config's handlers and networks front, each declared once, and the
// defaults every handler takes (Server, Defaults).

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/ident"
	"github.com/statusgate/statusgate/internal/nearest"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("statusgate", parseGlobalOption)
}

// parseGlobalOption reads the global statusgate option into the statusgate
// app's config:
//
//	{
//		statusgate {
//			server <name> <upstream>... [{
//				<the server's limits: max_in_flight, max_main_thread, queue,
//				 cache_size, max_response, max_held, instances, guard,
//				 max_streams, max_topics>
//				proxy {
//					<reverse_proxy subdirectives>
//				}
//			}]
//			game_metrics [on|off] [{ max_worlds <n>; entity_types [on|off] }]
//			<any option of a statusgate block but upstreams, proxy, server,
//			 network and the servers' limits: the defaults>
//		}
//	}
//
// A server line is read as a statusgate line of its own (statusgate
// <upstream>... { ... }), and the other lines together as a statusgate
// block: every error names the word and the line, as there.
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Errf("the global statusgate option given twice: write one block")
	}
	d.Next() // statusgate
	head := d.Token()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	cfg := struct {
		Servers     map[string]*Server `json:"servers,omitempty"`
		Defaults    *Defaults          `json:"defaults,omitempty"`
		GameMetrics *GameMetrics       `json:"game_metrics,omitempty"`
	}{}
	var defaults []caddyfile.Token
	var segs []caddyfile.Segment // the server lines, for their errors
	for d.NextBlock(0) {
		seg := d.NextSegment()
		if seg.Directive() == "game_metrics" {
			if cfg.GameMetrics != nil {
				return nil, errAt(seg[0], "game_metrics: given twice: write one")
			}
			var err error
			if cfg.GameMetrics, err = parseGameMetrics(seg); err != nil {
				return nil, err
			}
			continue
		}
		if seg.Directive() != "server" {
			defaults = append(defaults, seg...)
			continue
		}
		name, s, err := serverDeclaration(seg)
		if err != nil {
			return nil, err
		}
		if cfg.Servers[name] != nil {
			return nil, errAt(seg[1], "server %s: declared twice: each server once", name)
		}
		if cfg.Servers == nil {
			cfg.Servers = map[string]*Server{}
		}
		cfg.Servers[name] = s
		segs = append(segs, seg)
	}
	if first, second, guardName, firstDiff, secondDiff := guardShareConflict(cfg.Servers); second != "" {
		at := segs[slices.IndexFunc(segs, func(seg caddyfile.Segment) bool { return seg[1].Text == second })]
		for _, tok := range blockOptions(at[2:]) {
			if tok.Text == "guard" {
				at = caddyfile.Segment{tok}
			}
		}
		return nil, errAt(at[0], "global statusgate option, server %s: guard %s is server %s's too, with other limits (here %s, in server %s %s), and servers that name one guard count at it under one set of limits: %s",
			second, guardName, first, secondDiff, first, firstDiff, guardShareFix(first, second, true))
	}
	if len(defaults) > 0 {
		h, err := globalDefaults(head, defaults)
		if err != nil {
			return nil, err
		}
		cfg.Defaults = h
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "statusgate", Value: raw}, nil
}

// serverDeclaration reads a server line of the global option, seg: its
// name, and its backend and limits, read as the statusgate line
// `statusgate <upstream>... { ... }` is.
func serverDeclaration(seg caddyfile.Segment) (string, *Server, error) {
	if len(seg) < 2 {
		return "", nil, errAt(seg[0], "server: name the server and its upstream(s): server <name> <upstream>... [{ ... }]")
	}
	name := seg[1]
	if !ident.Valid(name.Text) {
		return "", nil, errAt(name, "server: '%s' is not a name of letters, digits, '_' and '-'", name.Text)
	}
	if len(seg) < 3 || seg[2].Line != name.Line || seg[2].Text == "{" {
		return "", nil, errAt(name, "server %s: no upstream: write server %s <upstream>..., as statusgate <upstream>... names its backend", name.Text, name.Text)
	}
	for _, tok := range blockOptions(seg[2:]) {
		if serverWords[tok.Text] || tok.Text == "proxy" {
			continue
		}
		if !slices.Contains(optionNames(caddyfileSyntax), tok.Text) {
			// A misspelt limit gets the nearest one, as in a handler's block.
			return "", nil, errAt(tok, "global statusgate option, server %s: unrecognized subdirective '%s'%s (a server's block holds its limits, %s, and its proxy block)",
				name.Text, tok.Text, nearest.Suggest(tok.Text, append(strings.Split(serverOptionList(), ", "), "proxy")), serverOptionList())
		}
		return "", nil, errAt(tok, "global statusgate option, server %s: '%s' is not a server's: a server's block holds its limits (%s) and its proxy block; put %s in the statusgate handlers, or among the global option's defaults",
			name.Text, tok.Text, serverOptionList(), tok.Text)
	}
	line := append(caddyfile.Segment{renamed(seg[0], "statusgate")}, seg[2:]...)
	// The Caddyfile adapter expands the shorthands ({remote_host},
	// {header.X}) of the sites' blocks, not of the global options: a
	// server's block reads like a handler's, so they are expanded here.
	httpcaddyfile.NewShorthandReplacer().ApplyToSegment(&line)
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewDispenser(line)); err != nil {
		return "", nil, globalOptionError("server "+name.Text, err)
	}
	// What the handler's Provision refuses of its declaration (a key
	// carried to the backend, a placeholder that would pick the server),
	// refused here with the server's line.
	if _, err := upstream.Parse("server "+name.Text+": proxy", h.ProxyRaw); err != nil {
		return "", nil, errAt(name, "%v", err)
	}
	return name.Text, &Server{ProxyRaw: h.ProxyRaw, Backend: h.Backend}, nil
}

// globalDefaults reads the global option's lines that are not servers,
// toks, as a statusgate block: the defaults. head is the option's name.
func globalDefaults(head caddyfile.Token, toks []caddyfile.Token) (*Defaults, error) {
	for _, tok := range blockOptions(append([]caddyfile.Token{{Text: "{", Line: head.Line}}, append(slices.Clone(toks), caddyfile.Token{Text: "}"})...)) {
		switch {
		case tok.Text == "proxy" || tok.Text == "network":
			return nil, errAt(tok, "global statusgate option, defaults: '%s' is a handler's, not a default: write it in the statusgate handler", tok.Text)
		case serverWords[tok.Text]:
			return nil, errAt(tok, "global statusgate option, defaults: '%s' is a server's limit: set it in each server's block (server <name> <upstream>... { %s ... })", tok.Text, tok.Text)
		}
		// A misspelt server limit: its name, and where it goes, at once.
		if c, ok := nearest.Word(tok.Text, optionNames(caddyfileSyntax)); ok && c != tok.Text && serverWords[c] {
			return nil, errAt(tok, "global statusgate option, defaults: unrecognized subdirective '%s'; did you mean %s? It is a server's limit: set it in each server's block (server <name> <upstream>... { %s ... })", tok.Text, c, c)
		}
	}
	last := toks[len(toks)-1]
	block := append(caddyfile.Segment{renamed(head, "statusgate"), renamed(head, "{")}, toks...)
	block = append(block, caddyfile.Token{File: last.File, Line: last.Line + 1, Text: "}"})
	var h Handler
	if err := h.unmarshalCaddyfile(caddyfile.NewDispenser(block), true, nil); err != nil {
		return nil, globalOptionError("defaults", err)
	}
	return &Defaults{Auth: h.Auth, Endpoints: h.Endpoints, Backend: h.Backend}, nil
}

// globalOptionError is err, of a line of the global option's part what (a
// server, "server lobby", or "defaults"), read as a statusgate block's
// line: named as the global option's, not a handler's.
func globalOptionError(what string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "statusgate: ")
	return errors.New("global statusgate option, " + what + ": " + msg)
}

// globalOption is the config's global statusgate option as its parser
// wrote it (parseGlobalOption), for the handler at h: nil when there is
// none. The Caddyfile adapter reads the global options before the sites.
func globalOption(h httpcaddyfile.Helper) (*App, error) {
	v, ok := h.Option("statusgate").(httpcaddyfile.App)
	if !ok {
		return nil, nil
	}
	var a App
	if err := json.Unmarshal(v.Value, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// blockOptions are the option words of a block, toks from its "{" (or the
// line before it) on: the first word of each line at the block's first
// level.
func blockOptions(toks []caddyfile.Token) []caddyfile.Token {
	var out []caddyfile.Token
	depth, line := 0, -1
	for _, tok := range toks {
		switch {
		case tok.Text == "{":
			depth++
		case tok.Text == "}":
			depth--
		case depth == 1 && tok.Line != line:
			out = append(out, tok)
		}
		line = tok.Line
	}
	return out
}

// renamed is tok with the text text: where a synthetic token stands, so
// that errors name the line it came from.
func renamed(tok caddyfile.Token, text string) caddyfile.Token {
	tok.Text = text
	return tok
}

// serverOptionList names a server's limits, for messages.
func serverOptionList() string {
	var names []string
	for _, o := range caddyfileSyntax {
		if serverWords[o.name] {
			names = append(names, o.name)
		}
	}
	return strings.Join(names, ", ")
}
