package caddymodule

// This file is AuthConfig: the access rules of a handler as the config
// writes them, read member by member, and the network's defaults taken
// where a handler says nothing.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
)

// AuthConfig is the access control of the gateway.
type AuthConfig struct {
	// Enabled is the global switch (auth.enabled). Off makes every endpoint and
	// field public and ignores require_key and protected_fields. Default: true.
	Enabled *bool `json:"enabled,omitempty"`

	// Keys are the accepted API keys; any number. Each is a string, the
	// secret or its digest "sha256:<64 hex digits>", or an object
	// {"name": "discord-bot", "key": "<secret or digest>", "endpoints":
	// ["status", "bans"], "max_in_flight": 2, "max_held": 16777216}; a key
	// without a name is called key-<n> by its position, counting from 1.
	// endpoints is the key's scope (default: every endpoint; the index is in
	// every scope): for any other endpoint its caller is a caller without a
	// key. max_in_flight caps the key's open requests, at the backend or
	// queued; past it its caller gets 429 at once (default: no cap of its
	// own). max_held is the key's share of the held bytes, in bytes, from
	// max_response to backend.max_held (default: max_response for each
	// request the guard admits for the key at once, at most a quarter of
	// max_held and never less than an address's share). The name is
	// what logs, placeholders and metrics show; names and secrets must be
	// distinct. Placeholders such as {env.NAME} and {file./path} are
	// expanded at provision time; surrounding white space is trimmed, and a
	// key that ends up empty is an error. A key that is one {file.*} or
	// {env.*} placeholder may carry "revision", a fingerprint of its value
	// that the Caddyfile adapter writes so that caddy reload applies a
	// changed file (revisionOf). Default: none, so that no caller has a
	// key.
	Keys []apikey.Key `json:"keys,omitempty"`

	// AllowQueryKey accepts the key in the ?key= query parameter as well as in
	// the X-API-Key header (auth.allow-query-key). Keys in URLs end up in
	// browser histories and logs, so it is meant for testing. Default: false.
	AllowQueryKey *bool `json:"allow_query_key,omitempty"`

	// HideProtected answers an unauthorised request to a protected endpoint with
	// the same 404 as an unknown one, and leaves protected endpoints out of the
	// index for callers without a key (auth.hide-protected). Default: true.
	HideProtected *bool `json:"hide_protected,omitempty"`

	// RequireKey says per endpoint whether a key is required
	// (auth.require-key.<endpoint>). Default: index, status and player are
	// public; every other endpoint requires a key.
	RequireKey map[string]bool `json:"require_key,omitempty"`

	// ProtectedFields lists per endpoint the member names removed, at any
	// depth, from responses to callers without a key
	// (auth.protected-fields.<endpoint>). An entry adds to what the
	// endpoint hides by default and by the global option's defaults; an
	// empty list hides nothing. Default: player: op, banned, chatplatform,
	// discord; server: motd, ip, port; worlds: seed.
	ProtectedFields map[string][]string `json:"protected_fields,omitempty"`

	// PublishFields lists per endpoint fields hidden by default or by the
	// global option's defaults that this handler makes public: the one way
	// to publish such a field, named by name. Each must
	// be hidden there and not in the endpoint's own protected_fields.
	// Default: none.
	PublishFields map[string][]string `json:"publish_fields,omitempty"`

	// ExtraFields names per endpoint fields of its answers that statusgate
	// does not know, so that protected_fields may name them: a field of a
	// newer plugin, or a name inside a map of the game's own names (a
	// statistic, a game rule). protected_fields of a built-in endpoint may
	// name only the fields docs/field-layer.md lists for it, and these; a
	// custom station's any. Default: none.
	ExtraFields map[string][]string `json:"extra_fields,omitempty"`

	// globalFields and globalPublish are the global option's
	// protected_fields and publish_fields (adopt), which this handler's
	// add to.
	globalFields, globalPublish map[string][]string
}

// UnmarshalJSON reads the auth object, refusing null where it would read as
// an absence that opens more than the author meant: a require_key entry of
// null would make the endpoint public, and a protected_fields entry of null
// would hide nothing. Config generators write null for an empty value; the
// error names the path, as the handler's other config errors do.
func (a *AuthConfig) UnmarshalJSON(b []byte) error {
	type plain AuthConfig // without this method
	var raw struct {
		RequireKey      map[string]json.RawMessage `json:"require_key"`
		ProtectedFields map[string]json.RawMessage `json:"protected_fields"`
		PublishFields   map[string]json.RawMessage `json:"publish_fields"`
	}
	if err := json.Unmarshal(b, &raw); err == nil {
		for _, section := range []struct {
			name, why string
			m         map[string]json.RawMessage
		}{
			{"require_key", "write true or false", raw.RequireKey},
			{"protected_fields", "write the list of fields, or [] to hide none", raw.ProtectedFields},
			{"publish_fields", "write the list of fields to publish", raw.PublishFields},
		} {
			for _, ep := range slices.Sorted(maps.Keys(section.m)) {
				if string(bytes.TrimSpace(section.m[ep])) == "null" {
					return fmt.Errorf("auth.%s.%s: null is not a value: %s, or leave %s out for its default", section.name, ep, section.why, ep)
				}
			}
		}
	}
	_, err := confjson.Object(b, "auth", (*plain)(a), nil) // every member by its path, unknown ones refused
	return err
}

// adopt takes the defaults' auth where c leaves it out: its keys after c's
// (but those c names itself), the entries of require_key for the
// endpoints c leaves out, its protected_fields and publish_fields as the
// level c's add to, and its extra_fields beside c's.
func (c *AuthConfig) adopt(d AuthConfig) error {
	if c.Enabled == nil {
		c.Enabled = d.Enabled
	}
	if c.HideProtected == nil {
		c.HideProtected = d.HideProtected
	}
	if c.AllowQueryKey == nil {
		c.AllowQueryKey = d.AllowQueryKey
	}
	// A key of the handler's own of a name the defaults' keys have is one
	// key with both secrets, and one block: lines whose blocks differ are
	// refused, as within one block, rather than one silently replacing
	// the other (sameKeyError).
	for i, k := range c.Keys {
		for j, dk := range d.Keys {
			if err := sameKeyError(k, dk); err != nil {
				return fmt.Errorf("auth.%s: %v (defaults.auth.%s)", apikey.EntryPath(i, k.Name), err, apikey.EntryPath(j, dk.Name))
			}
		}
	}
	c.Keys = slices.Clip(c.Keys)
	for _, dk := range d.Keys {
		// The global key written again in the handler, secret and all, is
		// that key once, not a secret given twice.
		if !slices.ContainsFunc(c.Keys, func(k apikey.Key) bool {
			_, same := apikey.SameLimits(k, dk)
			return k.Name == dk.Name && k.Secret == dk.Secret && same
		}) {
			c.Keys = append(c.Keys, dk)
		}
	}
	c.RequireKey = mergeEndpoints(c.RequireKey, d.RequireKey)
	// The defaults' field lists are a level of their own, which c's add
	// to (endpointFields), not entries c's replace.
	c.globalFields, c.globalPublish = d.ProtectedFields, d.PublishFields
	// The fields the defaults name are known to every handler.
	for ep, fields := range d.ExtraFields {
		if c.ExtraFields == nil {
			c.ExtraFields = map[string][]string{}
		}
		c.ExtraFields[ep] = append(slices.Clip(c.ExtraFields[ep]), slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return slices.Contains(c.ExtraFields[ep], f) })...)
	}
	return nil
}

// sameKeyError says why a handler's key k and the global option's key g,
// of the same name, cannot be one key: their blocks differ. A key's
// name is one key, whatever the block that writes it: which scope or cap a
// caller gets must not depend on which secret it sends, nor a scope
// written once in the global option be lost on one handler. nil for keys
// of other names, or unnamed ones (each unnamed key is a key of its own).
func sameKeyError(k, g apikey.Key) error {
	if k.Name == "" || k.Name != g.Name {
		return nil
	}
	if what, same := apikey.SameLimits(g, k); !same {
		return fmt.Errorf("%s not the same as on the global statusgate option's key '%s': a name is one key, and every secret of it has the key's block; give this key the same endpoints, max_in_flight and max_held, or a name of its own", what, k.Name)
	}
	return nil
}

// mergeEndpoints is own with def's entries for the endpoints own leaves
// out; def is not changed.
func mergeEndpoints[V any](own, def map[string]V) map[string]V {
	if len(def) == 0 {
		return own
	}
	out := maps.Clone(def)
	maps.Copy(out, own)
	return out
}
