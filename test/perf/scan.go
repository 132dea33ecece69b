package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// keyScan is the result of scanning a JSON document for protected member names.
type keyScan struct {
	Bytes     int64            // bytes read
	DataKeys  int64            // member names outside the top-level meta object
	Protected map[string]int64 // protected names found as member names outside the top-level meta
	Meta      []byte           // the top-level meta value, verbatim (nil if absent)
}

// leaked is the number of protected members found.
func (s *keyScan) leaked() int64 {
	var n int64
	for _, c := range s.Protected {
		n += c
	}
	return n
}

// maxKeyBytes bounds how much of a member name the scanner keeps: a protected
// name of n characters takes at most 6n bytes written as \u escapes.
const maxKeyBytes = 256

// maxMetaBytes bounds the captured top-level meta value.
const maxMetaBytes = 1 << 20

// keyScanner finds member names in a JSON stream without holding it: a string
// followed by ':' is a member name. It keeps one name at a time, unescapes it
// the way JSON does (so "o\u0070" is op), and tracks nesting to tell the
// top-level meta object apart. It checks that brackets balance and that the
// document ends where the top-level value ends; full validation is left to the
// samples, which are parsed with encoding/json.
type keyScanner struct {
	names map[string]bool
	res   keyScan

	stack    []byte // open '{' and '['
	inStr    bool
	esc      bool
	key      []byte // current string, escapes kept; capped at maxKeyBytes
	long     bool   // the current string is longer than maxKeyBytes
	afterStr bool   // a string just ended: a ':' next makes it a member name
	metaNext bool   // the last top-level member name was "meta"
	inMeta   bool   // inside the top-level meta value
	done     bool   // the top-level value has ended
	err      error
}

func newKeyScanner(names []string) *keyScanner {
	s := &keyScanner{names: map[string]bool{}}
	s.res.Protected = map[string]int64{}
	for _, n := range names {
		s.names[n] = true
	}
	return s
}

// scanKeys reads r to its end through a keyScanner.
func scanKeys(r io.Reader, names []string) (keyScan, error) {
	s := newKeyScanner(names)
	if _, err := io.CopyBuffer(s, r, make([]byte, 64<<10)); err != nil {
		return s.res, err
	}
	return s.finish()
}

func (s *keyScanner) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("byte %d: %s", s.res.Bytes, fmt.Sprintf(format, args...))
	}
}

// Write implements io.Writer, so that io.Copy can feed it.
func (s *keyScanner) Write(p []byte) (int, error) {
	for i, c := range p {
		if s.inMeta {
			if len(s.res.Meta) >= maxMetaBytes {
				s.fail("top-level meta longer than %d bytes", maxMetaBytes)
			} else {
				s.res.Meta = append(s.res.Meta, c)
			}
		}
		s.step(c)
		if s.err != nil {
			s.res.Bytes += int64(i)
			return i, s.err
		}
	}
	s.res.Bytes += int64(len(p))
	return len(p), nil
}

func (s *keyScanner) step(c byte) {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr, s.afterStr = false, true
			return
		}
		if len(s.key) < maxKeyBytes {
			s.key = append(s.key, c)
		} else {
			s.long = true
		}
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		return
	}
	if s.done {
		s.fail("data after the top-level value: %q", c)
		return
	}
	if s.afterStr {
		s.afterStr = false
		if c == ':' {
			s.member()
			return
		}
	}
	switch c {
	case '"':
		s.inStr, s.key, s.long = true, s.key[:0], false
	case '{', '[':
		if s.metaNext && len(s.stack) == 1 && c == '{' {
			s.inMeta = true
			s.res.Meta = append(s.res.Meta[:0], c)
		}
		s.metaNext = false
		s.stack = append(s.stack, c)
	case '}', ']':
		open := byte('{')
		if c == ']' {
			open = '['
		}
		if len(s.stack) == 0 || s.stack[len(s.stack)-1] != open {
			s.fail("unbalanced %q", c)
			return
		}
		s.stack = s.stack[:len(s.stack)-1]
		switch len(s.stack) {
		case 1:
			s.inMeta = false
		case 0:
			s.done = true
		}
	default:
		if len(s.stack) == 0 {
			s.fail("top-level value is not an object or array")
		}
		s.metaNext = false
	}
}

// member handles a completed member name (the string in s.key).
func (s *keyScanner) member() {
	if len(s.stack) == 0 || s.stack[len(s.stack)-1] != '{' {
		s.fail("member name outside an object")
		return
	}
	name := s.key
	if bytes.IndexByte(name, '\\') >= 0 && !s.long {
		var dec string
		if err := json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &dec); err != nil {
			s.fail("bad member name %q: %v", name, err)
			return
		}
		name = []byte(dec)
	}
	if len(s.stack) == 1 {
		s.metaNext = string(name) == "meta"
		if s.metaNext {
			return
		}
	}
	if s.inMeta {
		return
	}
	s.res.DataKeys++
	if !s.long && s.names[string(name)] {
		s.res.Protected[string(name)]++
	}
}

// finish checks that the document ended where its top-level value ended.
func (s *keyScanner) finish() (keyScan, error) {
	switch {
	case s.err != nil:
		return s.res, s.err
	case !s.done:
		return s.res, errors.New("document ends inside its top-level value")
	}
	return s.res, nil
}
