package ident

import "testing"

func TestValid(t *testing.T) {
	for _, s := range []string{"a", "Z", "0", "_", "-", "discord-bot", "key_2", "ABC-def_019"} {
		if !Valid(s) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", " ", "a b", "a.b", "a/b", "a:b", "ä", "key\x00", "tab\t", "{env.X}", "a\n"} {
		if Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}
