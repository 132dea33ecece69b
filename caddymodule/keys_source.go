package caddymodule

// This file says why a key written as one {env.*} or {file.*} placeholder
// has no secret when the config loads: what the source held, and what to
// write.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// keySourceError says why the key secret, one {env.*} or {file.*}
// placeholder, gives no secret in this process, and what to write: "" when
// it is no such placeholder or does give one. name is the key's name (its
// default one when it has none), for the fix. The message has no quotes,
// angle brackets or line breaks: caddy reload shows it JSON-encoded.
func keySourceError(secret, name string) string {
	if !placeholderOnly(secret) {
		return ""
	}
	ref := secret[1 : len(secret)-1]
	mk := "caddy statusgate-key --name " + name + " prints both"
	if v, isEnv := strings.CutPrefix(ref, "env."); isEnv {
		value, set := os.LookupEnv(v)
		var held string
		switch {
		case !set:
			held = "the environment variable " + v + " is not set in the environment caddy runs in"
		case value == "":
			held = "the environment variable " + v + " is set but empty in the environment caddy runs in"
		case strings.TrimSpace(value) == "":
			held = "the environment variable " + v + " holds only white space in the environment caddy runs in"
		default:
			return ""
		}
		return held + ": set " + v + " to the key's digest or secret where caddy starts (its service's environment, or the shell of caddy run; " + mk +
			"), then restart caddy, whose environment a reload cannot change; or keep the digest in a file, key " + name + " {file./etc/statusgate/" + name + ".digest}"
	}
	path, isFile := strings.CutPrefix(ref, "file.")
	if !isFile {
		return ""
	}
	shown := path
	if !filepath.IsAbs(path) {
		if wd, err := os.Getwd(); err == nil {
			shown = path + " (in caddy's working directory, " + wd + ")"
		}
	}
	write := "write the key's digest or secret in it, alone on one line (caddy statusgate-key --name " + name + " prints the digest and the line that writes the file), readable by the user caddy runs as, then reload"
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the key file " + shown + " does not exist: " + write
	case errors.Is(err, fs.ErrPermission):
		return "the key file " + shown + " cannot be read by the user caddy runs as (permission denied): make it readable by that user, and by no one else"
	case err != nil:
		return fmt.Sprintf("the key file %s cannot be read (%v): %s", shown, err, write)
	case len(b) == 0:
		return "the key file " + shown + " is empty: " + write
	case strings.TrimSpace(string(b)) == "":
		return "the key file " + shown + " holds only white space: " + write
	}
	return ""
}
