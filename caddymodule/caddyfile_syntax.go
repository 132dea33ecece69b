package caddymodule

// This file is the syntax of statusgate's Caddyfile: the options of the
// directive's block and of a key's, what they are called, and the errors
// that name a word and its line. Every reader of the Caddyfile uses it.

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// An option is a subdirective and its arguments as the syntax writes them.
type option struct{ name, args string }

// caddyfileSyntax is the syntax of the statusgate directive's block, in the
// order the documentation gives it: the source of the suggestion for an
// unrecognized subdirective and of the syntax an argument error shows. The
// backend options' lines are their declarations' (backendSyntax).
// TestSyntaxListsEveryOption keeps it equal to the parser's cases, and to
// the syntax blocks of UnmarshalCaddyfile's comment, the README and
// docs/configuration.md.
var caddyfileSyntax = slices.Concat([]option{
	{"auth", "on|off"},
	{"key", "[<name>] <secret>|sha256:<hex>"},
	{"allow_query_key", "[on|off]"},
	{"hide_protected", "[on|off]"},
	{"require_key", "<endpoint> on|off"},
	{"protected_fields", "<endpoint> [<field>...]"},
	{"publish_fields", "<endpoint> <field>..."},
	{"extra_fields", "<endpoint> <field>..."},
	{"enable", "<endpoint>..."},
	{"disable", "<endpoint>..."},
}, backendSyntax(), []option{
	{"server", "<name>"},
	{"proxy", ""},               // a block of reverse_proxy's subdirectives
	{"network", "<cluster-id>"}, // a block of servers and self
})

// backendSyntax is the backend options' lines of the statusgate block's
// syntax (caddyfileSyntax), in field order.
func backendSyntax() []option {
	var out []option
	for _, d := range backendDecls {
		if d.line == "" {
			continue
		}
		name, args, _ := strings.Cut(d.line, " ")
		if d.whyNotOff == "" {
			args += "|off"
		}
		out = append(out, option{name, args})
	}
	return out
}

// keySyntax is the syntax of a key's block, as caddyfileSyntax.
var keySyntax = []option{
	{"endpoints", "<endpoint>..."},
	{"max_in_flight", "<n>"},
	{"max_held", "<size>"},
}

// optionNames are the options' names, in order.
func optionNames(syntax []option) []string {
	out := make([]string, len(syntax))
	for i, o := range syntax {
		out[i] = o.name
	}
	return out
}

// argErr is the error for a line of the option opt with too few or too many
// arguments (the dispenser's current token is the last read): Caddy's
// ArgErr, and the option's syntax.
func argErr(d *caddyfile.Dispenser, opt string, syntax []option) error {
	args := "…"
	for _, o := range syntax {
		if o.name == opt {
			args = o.args
		}
	}
	return d.Errf("%s: wrong argument count or unexpected line ending after '%s'; write %s %s", opt, d.Val(), opt, args)
}

// optionWord reports whether w is a word of statusgate's block, or a
// switch's on or off, which no upstream is called: written on the
// directive's line by mistake, it would be read as a host name.
func optionWord(w string) bool {
	switch w {
	case "on", "off", "true", "false":
		return true
	}
	return slices.Contains(optionNames(caddyfileSyntax), w)
}

// repeatable are the options that may appear more than once: key, and those
// that name an endpoint, once per endpoint.
var repeatable = map[string]bool{
	"key": true, "require_key": true, "protected_fields": true, "publish_fields": true, "extra_fields": true, "enable": true, "disable": true,
	"cache": true, "snapshot": true,
}

// errAt is an error at the word tok, read earlier, with its file and line.
func errAt(tok caddyfile.Token, format string, args ...any) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Errf(format, args...)
}
