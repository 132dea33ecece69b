package apikey

import (
	"errors"
	"regexp"
	"strings"
	"unicode"
)

// A key's text, once its placeholders are expanded, is one secret or one
// digest, alone. A key file or variable that holds a line of what
// `caddy statusgate-key` prints around them ("digest: sha256:…", the
// Caddyfile line "key bot sha256:…", "secret: sg_…") would otherwise be a
// key whose secret is that whole line: the real secret refused, and the
// line, built from the digest that may be kept in git, accepted in its
// place. SecretTextError refuses such text.

// digestIn finds a sha256: digest within other text.
var digestIn = regexp.MustCompile(`(?i)sha256:[0-9a-f]{64}`)

// generatedIn finds a secret in the form Generate makes within other text.
var generatedIn = regexp.MustCompile(GeneratedPrefix + `[A-Za-z0-9_-]{43}`)

// SecretTextError reports why s, a key's whole text (a secret or
// "sha256:<hex>", white space around it trimmed), is not one secret: it
// has white space or control characters in it (a second word, a line of
// the generator's output), or it holds a digest or a generated secret
// after other text ("digest:sha256:…"), or starts with a label such as
// "secret:". nil for one word. The error says what to write instead and
// quotes nothing of s.
func SecretTextError(s string) error {
	const alone = "a key is one secret, or its sha256: digest, alone (docs/keys.md)"
	label := strings.ToLower(s)
	var what string
	switch {
	case strings.HasPrefix(s, DigestPrefix) && !strings.ContainsFunc(s, notInWord):
		return nil // a digest alone: ParseDigest checks its form
	case digestIn.MatchString(s):
		return errors.New("not one secret: it holds a sha256: digest among other text (a line such as `digest: sha256:…` or `key NAME sha256:…`, as caddy statusgate-key prints it); write the digest alone, sha256: and its 64 hex digits, or the secret alone: " + alone)
	case generatedIn.MatchString(s) && s != generatedIn.FindString(s):
		return errors.New("not one secret: it holds a secret of caddy statusgate-key among other text (a line such as `secret: sg_…`); write the secret alone, or its digest alone: " + alone)
	case strings.HasPrefix(label, "secret:"), strings.HasPrefix(label, "digest:"), strings.HasPrefix(label, "key:"):
		what = "a label before it"
	case strings.ContainsFunc(s, unicode.IsSpace):
		what = "more than one word"
	case strings.ContainsFunc(s, unicode.IsControl):
		what = "control characters"
	default:
		return nil
	}
	return errors.New("not one secret: it has " + what + "; write the secret alone, or its digest alone (sha256: and its 64 hex digits): " + alone)
}

// notInWord reports whether r cannot be part of one word of a key's text.
func notInWord(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }
