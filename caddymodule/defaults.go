package caddymodule

// This file is the statusgate app's defaults: what every statusgate handler
// of the config takes where it says nothing itself (Handler.adopt), and
// nothing a handler must refuse to take.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
)

// Defaults are what every statusgate handler of the config takes where it
// says nothing itself: keys (after its own), require_key and
// protected_fields per endpoint, the endpoint switches, hide_protected,
// allow_query_key, auth, and the front door's backend options (those
// declared statusgate:"door"). A handler cannot then forget the network's
// policy.
// Their JSON is a handler's members of the same names; a server's limit in
// their backend is refused (a server's declaration holds it).
type Defaults struct {
	// Auth is the handlers' access rules (Handler.Auth). Absent: none of
	// their own.
	Auth AuthConfig `json:"auth,omitzero"`
	// Endpoints switches endpoints on and off by name (Handler.Endpoints).
	// Absent: none.
	Endpoints map[string]bool `json:"endpoints,omitempty"`
	// Backend is the front door's backend options (Handler.Backend).
	// Absent: none.
	Backend BackendConfig `json:"backend,omitzero"`

	// misplaced is the first of a handler's own members (proxy, network,
	// server) that the JSON gave: check refuses it, with where it goes.
	misplaced string
}

// UnmarshalJSON reads the defaults member by member (internal/confjson),
// as a handler's config is read: the members of a handler's own are
// recognised, for check to refuse with where they go rather than as
// unknown, and a misspelt member is told the nearest of a handler's names.
func (d *Defaults) UnmarshalJSON(b []byte) error {
	type fields Defaults // without this method
	p := struct {
		*fields
		ProxyRaw json.RawMessage `json:"proxy,omitempty"`
		Server   string          `json:"server,omitempty"`
		Network  *NetworkConfig  `json:"network,omitempty"`
		Module   string          `json:"handler"`
	}{fields: (*fields)(d)}
	given, err := confjson.Object(b, "", &p, nil)
	if err != nil {
		return err
	}
	if _, named := given["handler"]; named && p.Module != "statusgate" {
		return fmt.Errorf("handler: %s is not this module's name: write \"statusgate\"", given["handler"])
	}
	switch {
	case p.ProxyRaw != nil:
		d.misplaced = "proxy"
	case p.Network != nil:
		d.misplaced = "network"
	case p.Server != "":
		d.misplaced = "server"
	}
	return nil
}

// check refuses, under the defaults' paths, what no handler may take from
// them: a handler's own member, a server's limit, and what every handler
// would check as its own once it takes them (the endpoint names of the
// switches and of require_key, the keys), refused once here rather than
// under each handler's path.
func (d *Defaults) check() error {
	switch d.misplaced {
	case "proxy":
		return errors.New("defaults.proxy: a backend is a server's or a handler's: declare it under servers, or in the handler")
	case "network":
		return errors.New("defaults.network: a network is a handler's: write it in the statusgate handler that answers /network")
	case "server":
		return errors.New("defaults.server: which server a handler fronts is the handler's to say")
	}
	if opt := setOption(&d.Backend, isServerOption); opt != "" {
		return fmt.Errorf("defaults.backend.%s: a server's limit: set it in each server's declaration (servers.NAME.backend.%s)", opt, opt)
	}
	if _, _, err := resolveGuard(d.Backend); err != nil {
		return fmt.Errorf("defaults: %v", err)
	}
	for _, section := range []struct {
		path  string
		names []string
	}{
		{"defaults.endpoints", slices.Sorted(maps.Keys(d.Endpoints))},
		{"defaults.auth.require_key", slices.Sorted(maps.Keys(d.Auth.RequireKey))},
	} {
		for _, name := range section.names {
			if !validEndpointName(name) {
				return fmt.Errorf("%s: %w", section.path, endpointNameError(name))
			}
		}
	}
	if _, _, err := loadKeys(d.Auth.Keys, false, zap.NewNop()); err != nil {
		return fmt.Errorf("defaults.%w", err)
	}
	return nil
}
