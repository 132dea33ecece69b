package caddymodule

// This file reads the source of a key written as one {env.*} or {file.*}
// placeholder, once: its value, or why it has none (what the source held,
// and what to write).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// keySource is what the source of a key secret written as one {env.*} or
// {file.*} placeholder (placeholderOnly) held when readKeySource read it.
// Whoever needs the key's value and whoever says why it has none use one
// read, so that a file changed meanwhile cannot give one its old text and
// the other its new one.
type keySource struct {
	// kind is "env" or "file"; "" for any other secret, which has no source.
	kind string
	name string // the variable's name, or the file's path as written
	text string // what the variable or the file held, as read
	set  bool   // the variable is set in the environment
	err  error  // why the file could not be read
}

// keyFileLimit is as much of a key file as is read: what Caddy's {file.*}
// placeholder reads, so that the value is the one it would give.
const keyFileLimit = 1 << 20

// readKeySource reads the source of the key secret when it is one {env.*}
// or {file.*} placeholder: the variable in this process's environment, or
// the file.
func readKeySource(secret string) keySource {
	if !placeholderOnly(secret) {
		return keySource{}
	}
	ref := secret[1 : len(secret)-1]
	if v, isEnv := strings.CutPrefix(ref, "env."); isEnv {
		text, set := os.LookupEnv(v)
		return keySource{kind: "env", name: v, text: text, set: set}
	}
	path, isFile := strings.CutPrefix(ref, "file.")
	if !isFile {
		return keySource{}
	}
	src := keySource{kind: "file", name: path}
	f, err := os.Open(path)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(f, keyFileLimit))
		f.Close()
		src.text = string(b)
	}
	src.err = err
	return src
}

// value is the key's value from its source, white space trimmed, as
// Provision uses it; ok is false when there is none (see problem).
func (s keySource) value() (value string, ok bool) {
	if s.kind == "" || s.err != nil {
		return "", false
	}
	value = strings.TrimSpace(s.text)
	return value, value != ""
}

// problem says why the source gives no secret in this process, and what to
// write: "" when the secret has no source (kind "") or its source does give
// one. keyName is the key's name (its default one when it has none), for
// the fix. The message has no quotes, angle brackets or line breaks: caddy
// reload shows it JSON-encoded.
func (s keySource) problem(keyName string) string {
	mk := "caddy statusgate-key --name " + keyName + " prints both"
	if s.kind == "env" {
		v := s.name
		var held string
		switch {
		case !s.set:
			held = "the environment variable " + v + " is not set in the environment caddy runs in"
		case s.text == "":
			held = "the environment variable " + v + " is set but empty in the environment caddy runs in"
		case strings.TrimSpace(s.text) == "":
			held = "the environment variable " + v + " holds only white space in the environment caddy runs in"
		default:
			return ""
		}
		return held + ": set " + v + " to the key's digest or secret where caddy starts (its service's environment, or the shell of caddy run; " + mk +
			"), then restart caddy, whose environment a reload cannot change; or keep the digest in a file, key " + keyName + " {file./etc/statusgate/" + keyName + ".digest}"
	}
	if s.kind != "file" {
		return ""
	}
	path := s.name
	shown := path
	if !filepath.IsAbs(path) {
		if wd, err := os.Getwd(); err == nil {
			shown = path + " (in caddy's working directory, " + wd + ")"
		}
	}
	write := "write the key's digest or secret in it, alone on one line (caddy statusgate-key --name " + keyName + " prints the digest and the line that writes the file), readable by the user caddy runs as, then reload"
	switch err := s.err; {
	case errors.Is(err, fs.ErrNotExist):
		return "the key file " + shown + " does not exist: " + write
	case errors.Is(err, fs.ErrPermission):
		return "the key file " + shown + " cannot be read by the user caddy runs as (permission denied): make it readable by that user, and by no one else"
	case err != nil:
		return fmt.Sprintf("the key file %s cannot be read (%v): %s", shown, err, write)
	case len(s.text) == 0:
		return "the key file " + shown + " is empty: " + write
	case strings.TrimSpace(s.text) == "":
		return "the key file " + shown + " holds only white space: " + write
	}
	return ""
}
