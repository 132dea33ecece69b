package caddymodule

// This file is the revision of a key read from a file or the environment:
// what makes `caddy reload` apply a changed key file. caddy reload adapts the
// Caddyfile in its own process and posts the JSON; Caddy skips a config
// equal to the one running ("config is unchanged"), and the JSON of a key
// {file./run/secrets/bot} holds the placeholder, not the secret, so a new
// secret in the file was never read and the leaked one stayed valid.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// revisionOf is the revision of a key whose value is value: the revision
// key's id (8 hex digits of its SHA-256), a dot, and an HMAC-SHA256 of the
// value under it (24 hex digits). It shows nothing of the secret to
// whoever reads the config (autosave.json, the admin API's /config/):
// without the revision key, which stays in Caddy's data folder, a guess of
// the secret cannot be checked against it, as it could against a plain
// hash. The id tells whether two revisions can be compared: those made
// under another key (another machine, another user) cannot.
func revisionOf(value string) (string, error) {
	key, err := revisionKey()
	if err != nil {
		return "", err
	}
	id := sha256.Sum256(key)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(value))
	return hex.EncodeToString(id[:4]) + "." + hex.EncodeToString(mac.Sum(nil)[:12]), nil
}

// sameRevisionKey reports whether the revisions a and b were made under one
// revision key, so that they differ only if the values do.
func sameRevisionKey(a, b string) bool {
	idA, _, okA := strings.Cut(a, ".")
	idB, _, okB := strings.Cut(b, ".")
	return okA && okB && idA == idB
}

// revisionKey is the key of revisionOf: 32 random bytes in Caddy's data
// folder (statusgate/key-revision), made the first time, readable by its
// owner only. It is one for every process of the user, so that `caddy
// run` and a later `caddy reload` give one key the same revision.
func revisionKey() ([]byte, error) {
	dir := filepath.Join(caddy.AppDataDir(), "statusgate")
	path := filepath.Join(dir, "key-revision")
	if b, err := os.ReadFile(path); err == nil && len(b) == 32 {
		return b, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, "key-revision-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// A link is made whole or not at all, and never replaces a key that
	// another process made meanwhile: both then use that one.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err == nil && len(b) != 32 {
		err = fmt.Errorf("%s: not a revision key (%d bytes); remove it and adapt again", path, len(b))
	}
	return b, err
}

// placeholderOnly reports whether a configured key is one placeholder that
// Provision expands and nothing else, such as {env.NAME} or {file./path}: a
// reference, which errors may show.
func placeholderOnly(s string) bool {
	known, unknown := placeholders(s)
	return known && !unknown &&
		len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && strings.Count(s, "{") == 1 && strings.Count(s, "}") == 1
}

// placeholders reports whether s holds placeholders that Provision expands
// (those of caddy.NewReplacer: {env.*}, {file.*}, {system.*}, {time.*}) and
// whether it holds any other, which Provision refuses. It finds them the way
// Caddy's replacer does (a brace written \{ opens none), and reads no file.
func placeholders(s string) (known, unknown bool) {
	global := caddy.NewReplacer()
	_, _ = caddy.NewEmptyReplacer().ReplaceFunc(s, func(key string, _ any) (any, error) {
		// {file.*} by its prefix: the global replacer would read the file.
		if strings.HasPrefix(key, "file.") {
			known = true
		} else if _, ok := global.Get(key); ok {
			known = true
		} else {
			unknown = true
		}
		return nil, nil
	})
	return known, unknown
}
