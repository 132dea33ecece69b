package caddymodule

// This file is the check of protected_fields' names: a name that the
// endpoint's answers do not have hides nothing, and a misspelt one
// (`protected_fields network player`, meant players) would leave public what
// it was written to hide.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/statusgate/statusgate/internal/nearest"
)

// fieldError is the error for the protected field called field of the
// endpoint called endpoint when the endpoint's answers have no member of
// that name (builtin.members) and extra, the names extra_fields gives it,
// does not add it; nil when they do, for a custom station (the gateway
// cannot know its answers) and for a name that is no endpoint (another
// check names that). fix says how the config at hand names a field the
// gateway does not know: the Caddyfile's extra_fields line or the JSON's
// member.
func fieldError(endpoint, field string, extra []string, fix string) error {
	i := slices.IndexFunc(builtins, func(b builtin) bool { return b.name == endpoint })
	if i < 0 || slices.Contains(builtins[i].members, field) || slices.Contains(extra, field) {
		return nil
	}
	known := append(slices.Clone(builtins[i].members), extra...)
	inside := ""
	if open := builtins[i].open; len(open) > 0 {
		inside = " or inside " + strings.Join(open, " or ")
	}
	return fmt.Errorf("%s has no field '%s'%s (docs/field-layer.md lists the fields of each endpoint; for a field that statusgate does not know, of a newer plugin%s, %s)",
		endpoint, field, nearest.Suggest(field, known), inside, fix)
}

// checkFields checks every name of protected (endpoint → fields) with
// fieldError against extra (endpoint → names extra_fields adds), in the
// JSON's terms: the error names auth.protected_fields.<endpoint>.
func checkFields(protected, extra map[string][]string) error {
	for _, ep := range slices.Sorted(maps.Keys(protected)) {
		for _, f := range protected[ep] {
			fix := fmt.Sprintf(`list "%s" in auth.extra_fields.%s too`, f, ep)
			if err := fieldError(ep, f, extra[ep], fix); err != nil {
				return fmt.Errorf("auth.protected_fields.%s: %v", ep, err)
			}
		}
	}
	return nil
}
