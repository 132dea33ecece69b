package caddymodule

// This file is the field lists in effect: each endpoint's built-in list
// under the levels the config adds to it (fieldLevels), as the Caddyfile
// adapter writes them and as a provisioned handler logs them.

import (
	"maps"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
)

// defaultFields is the default list of the endpoint ep: a built-in's, or
// none.
func defaultFields(ep string) []string {
	for _, b := range builtins {
		if b.name == ep {
			return b.fields
		}
	}
	return nil
}

// checkPublishLines checks the publish_fields lines of the Caddyfile block
// whose auth is c, each at the token at[endpoint], against what the
// defaults and the global option's defaults global (nil: none) hide;
// defaults says the block is the global option's own. The errors name the
// line.
func checkPublishLines(c, global *AuthConfig, defaults bool, at map[string]caddyfile.Token) error {
	levels := fieldLevels(global, c, "")
	if defaults {
		levels[0].where = globalLevel
	}
	for _, ep := range slices.Sorted(maps.Keys(c.PublishFields)) {
		if _, _, err := endpointFields(ep, defaultFields(ep), levels); err != nil {
			return errAt(at[ep], "%v", err)
		}
	}
	return nil
}

// writeEffective sets c's protected_fields, for every endpoint that c or
// the global option's defaults global name in protected_fields or
// publish_fields, to what the endpoint hides after every level: the
// Caddyfile adapter writes them so, so that caddy adapt's output shows
// each handler's effective lists where the config's lines touch them.
// Read again when the config loads they give the same lists (a list adds
// to the levels before it, and the published fields stay published).
func (c *AuthConfig) writeEffective(global *AuthConfig) error {
	levels := fieldLevels(global, c, "")
	names := map[string]bool{}
	for _, l := range levels {
		for ep := range l.fields {
			names[ep] = true
		}
		for ep := range l.publish {
			names[ep] = true
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(names)) {
		hidden, _, err := endpointFields(ep, defaultFields(ep), levels)
		if err != nil {
			return err
		}
		if c.ProtectedFields == nil {
			c.ProtectedFields = map[string][]string{}
		}
		c.ProtectedFields[ep] = append([]string{}, hiddenFieldNames(hidden)...)
	}
	return nil
}

// logFields writes, once the handler is provisioned with auth on, what
// each enabled endpoint hides from callers without a key and which place
// hides it, and a warning for each field hidden by default or by the
// global option that a handler's line publishes: the effective lists
// that the config's lines add up to.
func logFields(logger *zap.Logger, t *endpointTable) {
	var hidden, published []string
	for _, ep := range t.ordered {
		if !ep.enabled {
			continue
		}
		if len(ep.hidden) > 0 {
			var parts []string
			for _, f := range ep.hidden {
				parts = append(parts, f.name+" ("+f.by+")")
			}
			hidden = append(hidden, ep.Name+": "+strings.Join(parts, ", "))
		}
		for _, f := range ep.published {
			published = append(published, ep.Name+": "+f.name+" (hidden by "+f.by+")")
		}
	}
	logger.Info("fields hidden from callers without a key", zap.Strings("hidden_fields", hidden))
	if len(published) > 0 {
		logger.Warn("fields hidden by default or by the global statusgate option are public on this handler", zap.Strings("published_fields", published))
	}
}
