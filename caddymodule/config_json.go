package caddymodule

// This file is the JSON config read member by member (internal/confjson):
// every mistake names the option's path, shows the value as written and
// says what to write, an unknown member is refused with the nearest
// option's name, and a value the Caddyfile cannot write is refused in JSON
// too.

import (
	"fmt"
	"strings"

	"github.com/statusgate/statusgate/caddymodule/internal/confjson"
)

// UnmarshalJSON reads the handler's config; see the file's comment.
// AuthConfig's is beside the AuthConfig type. The module's name, "handler":
// "statusgate", is Caddy's to read (it takes it out before the module
// decodes its config), and passes where a whole route's handler is decoded.
func (h *Handler) UnmarshalJSON(b []byte) error {
	type plain struct {
		*handlerFields
		Module string `json:"handler"`
	}
	p := plain{handlerFields: (*handlerFields)(h)}
	given, err := confjson.Object(b, "", &p, nil)
	if _, named := given["handler"]; err == nil && named && p.Module != "statusgate" {
		return fmt.Errorf("handler: %s is not this module's name: write \"statusgate\"", given["handler"])
	}
	return err
}

// handlerFields is Handler without its JSON method.
type handlerFields Handler

// UnmarshalJSON reads the backend object. Besides the mistakes confjson
// finds, a number written as 0 (or a duration as "0s", the guard as "") is
// refused: the Caddyfile cannot write it, and leaving the option out says
// "the default" without guessing whether 0 meant that, off or nothing.
func (c *BackendConfig) UnmarshalJSON(b []byte) error {
	type plain BackendConfig // without this method
	given, err := confjson.Object(b, "backend", (*plain)(c), offHint)
	if err != nil {
		return err
	}
	for _, name := range confjson.Zeros((*plain)(c), given) {
		what, write := zeroWant(name)
		return fmt.Errorf("backend.%s: %s is not %s: %s, leave %s out for its default%s",
			name, given[name], what, write, name, orOffWant("", ", or write -1 for off", optionDecls[name].offIsMinusOne()))
	}
	return nil
}

// offHint is what a backend option may be besides a value of its type: off,
// written -1, where it can be off.
func offHint(path string) string {
	opt, _, _ := strings.Cut(strings.TrimPrefix(path, "backend."), ".")
	if optionDecls[opt].offIsMinusOne() {
		return "-1 for off"
	}
	return ""
}

// zeroWant is what a backend option takes and how it is written, for the
// message about a 0: a number's as its declaration says (optionDecl.what
// and write).
func zeroWant(name string) (what, write string) {
	if name == "guard" {
		return "a guard name", "write one of letters, digits, '_' and '-'"
	}
	d := optionDecls[name]
	return d.what(), d.write()
}
