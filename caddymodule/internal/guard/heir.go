package guard

import (
	"fmt"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// This file is a guard's succession across a reload that renames it: the
// same game server, declared under another name (its upstream spelled
// localhost:8080 where it was 127.0.0.1:8080, or a guard <name> added or
// removed), must keep the counts of the trips the old config still has at
// it. Under a name of its own the new config's handler would start a guard
// at zero beside the old one, and the backend would get twice
// max_in_flight for as long as the old trips last.

// heir is the guard state that a handler of c's load takes over when c.Name
// is new to the pool: that of a guard of earlier loads only, in front of
// the server c declares (upstream.Backend.Server: whatever the dials'
// spelling). nil: none (a handler that declares no backend, or a server no
// guard fronts), and the handler's guard starts anew. A guard some handler
// of c's own load uses is never taken: two guards of one load are the
// config's choice.
func heir(c Config) *guardState {
	if c.Backend == nil {
		return nil
	}
	server := c.Backend.Server()
	var found *guardState
	var foundName string
	guards.Range(func(key, v any) bool {
		p, ok := v.(pooled)
		s := p.guardState
		name := fmt.Sprint(key)
		if !ok || name == c.Name || !s.onlyBefore(c.Load, server) {
			return true
		}
		if found == nil || name < foundName { // one answer, whatever the pool's order
			found, foundName = s, name
		}
		return true
	})
	return found
}

// onlyBefore reports whether the guard fronts server and is in use, and
// only by handlers of loads before load.
func (s *guardState) onlyBefore(load uint64, server string) bool {
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	return s.servers[server] && len(s.users) > 0 && s.users[len(s.users)-1].load < load
}

// fronts records that a handler in front of b uses the guard; b nil: a
// handler that declares no backend.
func (s *guardState) fronts(b *upstream.Backend) {
	if b == nil {
		return
	}
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	if s.servers == nil {
		s.servers = map[string]bool{}
	}
	s.servers[b.Server()] = true
}
