package caddymodule

import (
	"bytes"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/cors"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/internal/apijson"
)

// apiVersion is the version of the HTTP interface statusgate offers, which the
// index reports; it moves with the interface, not with releases.
const apiVersion = "1.1.0"

// indexCache holds the possible data parts of the index, rendered once at
// provision time: the list a caller may see depends only on whether it may see
// protected endpoints, and which, for a key with a scope.
type indexCache struct {
	all    []byte   // every enabled endpoint
	public []byte   // only those that need no key
	scoped [][]byte // by keyring position: the public ones and the key's scope; nil for a key that opens everything
}

type indexData struct {
	Name        string         `json:"name"`
	APIVersion  string         `json:"apiVersion"`
	AuthEnabled bool           `json:"authEnabled"`
	Versions    []indexVersion `json:"versions"`
	Alias       string         `json:"alias"`
	Stations    []indexStation `json:"stations"`
}

type indexVersion struct {
	Version string `json:"version"`
	Path    string `json:"path"`
	Current bool   `json:"current"`
}

type indexStation struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	Description string `json:"description"`
	RequiresKey bool   `json:"requiresKey"`
}

// newIndexCache renders the index's lists of t's endpoints: for callers who
// may read every endpoint, for those who may read only the public ones, and
// for each key with a scope (keys, by keyring position).
func newIndexCache(authOn bool, t *endpointTable, keys []keyInfo) *indexCache {
	encode := func(opens func(*endpoint) bool) []byte {
		d := indexData{
			Name:        "statusgate",
			APIVersion:  apiVersion,
			AuthEnabled: authOn,
			Versions:    []indexVersion{{Version: "v1", Path: "/api/v1", Current: true}},
			Alias:       "/api → /api/v1",
			Stations:    []indexStation{},
		}
		for _, ep := range t.ordered {
			if ep.Name == "index" || !ep.enabled || (ep.requireKey && !opens(ep)) {
				continue
			}
			d.Stations = append(d.Stations, indexStation{
				Name: ep.Name, Path: ep.indexPath, Description: ep.description, RequiresKey: ep.requireKey,
			})
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(d) // plain strings and bools: cannot fail
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	c := &indexCache{
		all:    encode(func(*endpoint) bool { return true }),
		public: encode(func(*endpoint) bool { return false }),
		scoped: make([][]byte, len(keys)),
	}
	for i, s := range keys {
		if s.endpoints != nil {
			c.scoped[i] = encode(func(ep *endpoint) bool { return s.opens(ep.Name) })
		}
	}
	return c
}

// data is the index's data part for who: every enabled endpoint, unless
// hide_protected is on and who may not read them all.
func (c *indexCache) data(who caller, hide bool) []byte {
	switch {
	case !hide:
		return c.all
	case !who.Authenticated:
		return c.public
	case who.key != noKey && c.scoped[who.key] != nil:
		return c.scoped[who.key]
	}
	return c.all
}

// serve answers GET /api/v1 itself; the backend's index would describe the
// backend's config, not the gateway's. While hide_protected is on, a caller
// sees only the endpoints it may read: without an accepted key the public
// ones, with a scoped key the public ones and the key's scope. When the field
// layer applies to the index, its protected fields are removed like anywhere else.
func (c *indexCache) serve(w http.ResponseWriter, who caller, ep *endpoint, hide bool, logger *zap.Logger) guard.Verdict {
	b, err := ownAnswer(c.data(who, hide), nil, who.Caller, ep)
	if err != nil {
		// The gateway rendered this body itself; failing here is a bug.
		logger.Error("filtering the index", zap.Error(err))
		return guard.Verdict{Outcome: metrics.Index, Status: http.StatusInternalServerError}
	}
	cors.Set(w.Header())
	apijson.Write(w, http.StatusOK, b)
	return guard.Verdict{Outcome: metrics.Index}
}
