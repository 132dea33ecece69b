// Package ident checks the names an operator gives to things in the config
// (custom stations, API keys): letters, digits, '_' and '-' only, so that a
// name is one path segment, one Caddyfile word and one metric label value
// that never needs escaping or quoting.
package ident

// Valid reports whether s is a non-empty name of ASCII letters, digits, '_'
// and '-'.
func Valid(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
