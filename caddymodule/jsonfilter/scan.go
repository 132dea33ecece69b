package jsonfilter

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Byte classes, so that byte-at-a-time loops (whitespace, the last bytes of a
// chunk) cost one load and one branch per byte; the word-at-a-time (SWAR)
// loops for string bodies and digits.
var (
	strSpecial [256]bool // ends a run of plain string bytes: '"', '\\', controls
	isSpace    [256]bool // JSON whitespace
	hexVal     [256]int8 // value of a hex digit, -1 otherwise
	unescape   [256]byte // byte a one-letter escape stands for, 0 if invalid
	valueStart [256]bool // can start a JSON value: tells "not an object" from garbage
	metaKey    = "meta"  // the top-level member that is held back
	dropKeys   = [2]string{"hiddenFields", "authenticated"}
	metaKeyMax = len("authenticated") // longest of dropKeys
)

func init() {
	for c := 0; c < 0x20; c++ {
		strSpecial[c] = true
	}
	strSpecial['"'] = true
	strSpecial['\\'] = true
	for _, c := range " \t\r\n" {
		isSpace[c] = true
	}
	for c := range hexVal {
		hexVal[c] = -1
	}
	for c := '0'; c <= '9'; c++ {
		hexVal[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		hexVal[c] = int8(c - 'a' + 10)
		hexVal[c-'a'+'A'] = int8(c - 'a' + 10)
	}
	for esc, b := range map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'} {
		unescape[esc] = b
	}
	for _, c := range "{[\"-0123456789tfn" {
		valueStart[c] = true
	}
}

// skipSpace returns the index of the first non-whitespace byte in p at or
// after i, or len(p).
func skipSpace(p []byte, i int) int {
	for i < len(p) && isSpace[p[i]] {
		i++
	}
	return i
}

// ctxFor says which names keys of an object at stack depth d are compared with.
func (f *Filter) ctxFor(d int) keyCtx {
	if f.inMeta {
		if d == 2 {
			return ctxMetaDirect
		}
		return ctxNone
	}
	if d == 1 {
		return ctxTop
	}
	return f.namesCtx
}

// beginHold starts holding back output at p[at]: a ',' (comma) or whatever
// follows a '{', up to the decision on the next key.
func (f *Filter) beginHold(at int, comma bool, c keyCtx) {
	f.holding = true
	f.holdStart = at
	f.commaHeld = comma
	f.spaceOver = false
	f.keyCtx = c
	switch c {
	case ctxTop:
		f.keyMax = max(f.names.maxLen, len(metaKey))
	case ctxMetaDirect:
		f.keyMax = metaKeyMax
	default:
		f.keyMax = f.names.maxLen
	}
}

// keepHeld releases the held bytes as kept output and returns the new start
// of the pending kept run. The held comma goes when the object has written no
// member yet (every member before it was removed).
func (f *Filter) keepHeld(p []byte, runStart int) (int, error) {
	f.holding = false
	drop := f.commaHeld && !f.wrote
	f.wrote = true
	if len(f.held) == 0 {
		// Everything held is still in p, right after the pending run.
		if drop {
			return f.holdStart + 1, f.emit(p[runStart:f.holdStart])
		}
		return runStart, nil
	}
	h := f.held
	if drop {
		h = h[1:]
	}
	err := f.emit(h)
	f.held = f.held[:0]
	return f.holdStart, err
}

// dropHeld discards the held bytes of a removed member, writing the kept run
// before them.
func (f *Filter) dropHeld(p []byte, runStart int) error {
	f.holding = false
	if len(f.held) == 0 {
		return f.emit(p[runStart:f.holdStart])
	}
	f.held = f.held[:0]
	return nil
}

// compactHold is called when the key's opening quote (or the '}' of an empty
// object) is at p[q]. If more than maxHeldSpace bytes of whitespace were held
// before it, they are dropped so that held memory stays bounded; the rule
// depends only on the input, never on its chunking.
func (f *Filter) compactHold(p []byte, q, runStart int) (int, error) {
	comma := 0
	if f.commaHeld {
		comma = 1
	}
	if !f.spaceOver && len(f.held)+q-f.holdStart-comma <= maxHeldSpace {
		return runStart, nil
	}
	var err error
	if len(f.held) == 0 {
		err = f.emit(p[runStart:f.holdStart])
	}
	f.held = f.held[:0]
	if f.commaHeld {
		f.held = append(f.held, ',')
	}
	f.holdStart = q
	f.spaceOver = false
	return q, err
}

// carryHold runs at the end of a chunk while a key is undecided: it writes
// the kept run before the held bytes and copies the held bytes out of p,
// which the caller may reuse.
func (f *Filter) carryHold(p []byte, runStart int) error {
	var err error
	if len(f.held) == 0 {
		err = f.emit(p[runStart:f.holdStart])
	}
	rest := p[f.holdStart:]
	if f.st == stKey || f.st == stKeyOrEnd {
		// Still in whitespace before the key: hold at most the comma and
		// maxHeldSpace bytes; compactHold drops them all later.
		room := maxHeldSpace - len(f.held)
		if f.commaHeld {
			room++
		}
		if len(rest) > room {
			rest = rest[:max(room, 0)]
			f.spaceOver = true
		}
	}
	f.held = append(f.held, rest...)
	f.holdStart = 0
	return err
}

// classify matches a decoded key against the names of the current context.
func (f *Filter) classify(key []byte) int {
	if f.names.fffd && !utf8.Valid(key) {
		key = f.replaceInvalid(key)
	}
	switch f.keyCtx {
	case ctxMetaDirect:
		if string(key) == dropKeys[0] || string(key) == dropKeys[1] {
			return keyMetaDrop
		}
		return keyKeep
	case ctxTop:
		if string(key) == metaKey {
			return keyMeta
		}
	}
	return f.names.lookup(key)
}

// replaceInvalid replaces each invalid UTF-8 byte with U+FFFD, as
// encoding/json does when it unquotes a key.
func (f *Filter) replaceInvalid(key []byte) []byte {
	out := f.norm[:0]
	for len(key) > 0 {
		r, size := utf8.DecodeRune(key)
		out = utf8.AppendRune(out, r)
		key = key[size:]
	}
	f.norm = out
	return out
}

// appendU adds the code point of a \u escape to the decoded key, pairing
// surrogates exactly as encoding/json does: a valid pair is one rune, any
// other surrogate is U+FFFD.
func (f *Filter) appendU(r rune) {
	if f.pendHigh != 0 {
		h := f.pendHigh
		f.pendHigh = 0
		if r >= 0xDC00 && r < 0xE000 {
			f.key = utf8.AppendRune(f.key, utf16.DecodeRune(h, r))
			return
		}
		f.key = utf8.AppendRune(f.key, utf8.RuneError)
	}
	switch {
	case r >= 0xD800 && r < 0xDC00:
		f.pendHigh = r
	case r >= 0xDC00 && r < 0xE000:
		f.key = utf8.AppendRune(f.key, utf8.RuneError)
	default:
		f.key = utf8.AppendRune(f.key, r)
	}
}

// flushHigh turns a high surrogate that found no low half into U+FFFD.
func (f *Filter) flushHigh() {
	if f.pendHigh != 0 {
		f.pendHigh = 0
		f.key = utf8.AppendRune(f.key, utf8.RuneError)
	}
}

func (f *Filter) fail(i int, kind error, msg string) error {
	return &Error{Kind: kind, Offset: f.off + int64(i), Msg: msg}
}

// syntax reports an unexpected byte p[i], in encoding/json's words.
func (f *Filter) syntax(p []byte, i int, context string) error {
	c := p[i]
	var q string
	switch {
	case c == '\'':
		q = `'\''`
	case c == '"':
		q = `'"'`
	case c < utf8.RuneSelf && strconv.IsPrint(rune(c)):
		q = "'" + string(rune(c)) + "'"
	default:
		q = strconv.Quote(string([]byte{c}))
	}
	return f.fail(i, ErrSyntax, "invalid character "+q+" "+context)
}

// scan runs the parser over one chunk. It is one flat state machine: each
// label is a state, reached by goto, so the hot paths (string bodies, digits,
// whitespace, the next key) run as tight loops without a dispatch per byte
// and without recursion. When p runs out the state is saved in f.st and the
// next chunk resumes there.
//
// Output is a run of kept bytes p[runStart:i] written only when something
// interrupts it (a removed member, a dropped comma) or the chunk ends, so a
// document with few removals costs about one dst.Write per chunk.
//
// The map: a saved state (type state), its label, and where the label goes.
// Labels without a state never outlive a chunk: they consume bytes already
// in hand.
//
//	stStart      start       '{' → pushObj; any other value → ErrNotObject
//	             pushObj     depth check, key context → keyOrEnd
//	stKeyOrEnd   keyOrEnd    '}' → popObj; '"' → keyQuote
//	stKey        key         '"' → keyQuote (after ',' in an object)
//	             keyQuote    no names to match here → str; the whole key in the
//	                         chunk without escapes → decideKey; already too long
//	                         to match → keyGiveUp; else → keyStr (escapes, or
//	                         the key spans chunks)
//	             keyGiveUp   keep the key → str
//	             decideKey   kept → colon; removed, or the top-level meta: drop
//	                         what was held, skip the member → colon
//	stColon      colon       ':' → value
//	stValue      value       '"' → str; '{' → pushObj; '[' → pushArr;
//	                         '-' → numMinus; '0' → numZero; 1-9 → numInt;
//	                         t/f/n → litStart (stLit: lit)
//	             pushArr     depth check → valueOrEnd
//	stValueOrEnd valueOrEnd  ']' → popArr; else → value
//	stAfter      after       ',' → key or value; '}' → popObj; ']' → popArr
//	             popObj      the top-level '}' → done (Close writes meta before
//	                         it); the end of meta's value → after, as after a
//	                         removed member; any other → after
//	             popArr      → after
//	stDone       done        only whitespace may follow
//	stStr        str         '"' → colon (a key) or after (a value); '\' → strEsc
//	stStrEsc     strEsc      'u' → strU; else → str, or keyGrown when decoding a key
//	stStrU       strU        four hex digits → str or keyGrown
//	stKeyStr     keyStr      '"' → decideKey; '\' → strEsc
//	             keyGrown    key now too long to match → keyGiveUp; else → keyStr
//	stNumMinus   numMinus    '0' → numZero; 1-9 → numInt
//	stNumInt     numInt      digits, then as numZero
//	stNumZero    numZero     '.' → numDot; 'e'/'E' → numExp0; else → after
//	stNumDigit   numDot/numDigit  a digit → numMore
//	stNumMore    numMore     'e'/'E' → numExp0 (not after an exponent); else → after
//	stNumExp0    numExp0     sign, → numDigit
//	stLit        lit         the rest of true/false/null → after
//
// Every label that runs out of input saves its state in f.st and jumps to out,
// which flushes the pending run; every error returns through f.fail or f.syntax.
func (f *Filter) scan(p []byte) error {
	var (
		n        = len(p)
		i        int
		j        int
		c        byte
		r        int
		runStart int
		err      error
	)
	switch f.st {
	case stStart:
		goto start
	case stValue:
		goto value
	case stValueOrEnd:
		goto valueOrEnd
	case stKeyOrEnd:
		goto keyOrEnd
	case stKey:
		goto key
	case stColon:
		goto colon
	case stAfter:
		goto after
	case stDone:
		goto done
	case stStr:
		goto str
	case stStrEsc:
		goto strEsc
	case stStrU:
		goto strU
	case stKeyStr:
		goto keyStr
	case stNumMinus:
		goto numMinus
	case stNumZero:
		goto numZero
	case stNumInt:
		goto numInt
	case stNumDigit:
		goto numDigit
	case stNumMore:
		goto numMore
	case stNumExp0:
		goto numExp0
	case stLit:
		goto lit
	}
	return f.fail(0, ErrSyntax, "internal error: unknown state")

start:
	i = skipSpace(p, i)
	if i == n {
		f.st = stStart
		goto out
	}
	if p[i] != '{' {
		if valueStart[p[i]] {
			return f.fail(i, ErrNotObject, "top-level value is not an object")
		}
		return f.syntax(p, i, "looking for beginning of value")
	}

pushObj: // p[i] == '{'
	if len(f.stack) >= f.maxDepth {
		return f.fail(i, ErrDepth, "exceeded max depth")
	}
	f.stack = append(f.stack, '{')
	i++
	if !f.skipping {
		f.wrote = false
		if kc := f.ctxFor(len(f.stack)); kc != ctxNone {
			f.beginHold(i, false, kc)
		}
	}

keyOrEnd:
	i = skipSpace(p, i)
	if i == n {
		f.st = stKeyOrEnd
		goto out
	}
	if p[i] == '}' {
		if f.holding {
			if runStart, err = f.compactHold(p, i, runStart); err != nil {
				return err
			}
			if runStart, err = f.keepHeld(p, runStart); err != nil {
				return err
			}
			f.wrote = false // the object stays empty
		}
		goto popObj
	}
	if p[i] != '"' {
		return f.syntax(p, i, "looking for beginning of object key string")
	}
	goto keyQuote

key:
	i = skipSpace(p, i)
	if i == n {
		f.st = stKey
		goto out
	}
	if p[i] != '"' {
		return f.syntax(p, i, "looking for beginning of object key string")
	}

keyQuote: // p[i] == '"'
	if !f.holding {
		i++
		f.strNext = stColon
		goto str
	}
	if len(f.held) > 0 || i-f.holdStart > maxHeldSpace {
		if runStart, err = f.compactHold(p, i, runStart); err != nil {
			return err
		}
	}
	j = plainEnd(p, i+1)
	if j < n && p[j] == '"' {
		// The whole key is here without escapes: compare the raw bytes.
		k := p[i+1 : j]
		i = j + 1
		r = keyKeep
		if len(k) <= f.keyMax && (f.keyCtx != ctxNames || f.names.maybe(k)) {
			r = f.classify(k)
		}
		goto decideKey
	}
	// An escape, the end of the chunk or a control character comes first.
	if j-(i+1) > f.keyMax {
		i = j
		goto keyGiveUp // already too long to match anything
	}
	f.key = append(f.key[:0], p[i+1:j]...)
	f.pendHigh = 0
	f.decoding = true
	i = j
	goto keyStr

keyGiveUp: // the key can match nothing: keep it, scan the rest as a plain string
	f.decoding = false
	if runStart, err = f.keepHeld(p, runStart); err != nil {
		return err
	}
	f.strNext = stColon
	goto str

decideKey: // r says what the key just read means; i is past its closing quote
	switch r {
	case keyKeep:
		if len(f.held) == 0 && (!f.commaHeld || f.wrote) {
			f.holding = false // nothing to write or drop: the run goes on
			f.wrote = true
		} else if runStart, err = f.keepHeld(p, runStart); err != nil {
			return err
		}
		goto colon
	case keyMeta:
		if f.metaSeen {
			return f.fail(i-1, ErrMeta, "duplicate top-level meta")
		}
		f.metaSeen = true
		f.metaNext = true
	case keyMetaDrop:
	default:
		f.found[r] = true
	}
	if err = f.dropHeld(p, runStart); err != nil {
		return err
	}
	f.skipping = true
	f.skipDepth = len(f.stack)

colon:
	if i < n && p[i] == ':' { // compact JSON: no space to skip
		i++
		goto value
	}
	i = skipSpace(p, i)
	if i == n {
		f.st = stColon
		goto out
	}
	if p[i] != ':' {
		return f.syntax(p, i, "after object key")
	}
	i++

value:
	i = skipSpace(p, i)
	if i == n {
		f.st = stValue
		goto out
	}
	c = p[i]
	if f.metaNext {
		// The top-level meta value: capture it into f.meta, unfiltered
		// but for its own hiddenFields and authenticated.
		f.metaNext = false
		if c != '{' {
			return f.fail(i, ErrMeta, "top-level meta is not an object")
		}
		f.skipping = false
		f.inMeta = true
		f.metaStart = f.off + int64(i)
		f.meta = append(f.meta[:0], `,"meta":`...)
		f.savedWrote = f.wrote
		runStart = i
		goto pushObj
	}
	switch c {
	case '"':
		i++
		f.strNext = stAfter
		goto str
	case '{':
		goto pushObj
	case '[':
		goto pushArr
	case '-':
		i++
		goto numMinus
	case '0':
		i++
		goto numZero
	case 't':
		f.lit = "true"
		goto litStart
	case 'f':
		f.lit = "false"
		goto litStart
	case 'n':
		f.lit = "null"
		goto litStart
	}
	if c-'1' <= 8 {
		i++
		goto numInt
	}
	return f.syntax(p, i, "looking for beginning of value")

pushArr: // p[i] == '['
	if len(f.stack) >= f.maxDepth {
		return f.fail(i, ErrDepth, "exceeded max depth")
	}
	f.stack = append(f.stack, '[')
	i++

valueOrEnd:
	i = skipSpace(p, i)
	if i == n {
		f.st = stValueOrEnd
		goto out
	}
	if p[i] == ']' {
		goto popArr
	}
	goto value

after:
	i = skipSpace(p, i)
	if i == n {
		f.st = stAfter
		goto out
	}
	c = p[i]
	if f.stack[len(f.stack)-1] == '{' {
		if c == ',' {
			if f.skipping && len(f.stack) == f.skipDepth {
				f.skipping = false // end of a removed member
				runStart = i
			}
			if !f.skipping {
				if kc := f.ctxFor(len(f.stack)); kc != ctxNone {
					f.beginHold(i, true, kc)
				}
			}
			i++
			goto key
		}
		if c == '}' {
			if f.skipping && len(f.stack) == f.skipDepth {
				f.skipping = false
				runStart = i
			}
			goto popObj
		}
		return f.syntax(p, i, "after object key:value pair")
	}
	if c == ',' {
		i++
		goto value
	}
	if c == ']' {
		goto popArr
	}
	return f.syntax(p, i, "after array element")

popObj: // p[i] == '}'
	f.stack = f.stack[:len(f.stack)-1]
	if len(f.stack) == 0 {
		// The top-level '}' is held back: Close writes meta before it.
		if !f.skipping {
			if err = f.emit(p[runStart:i]); err != nil {
				return err
			}
		}
		f.topWrote = f.wrote
		f.skipping = true // nothing after the document is written
		f.skipDepth = -1
		i++
		goto done
	}
	if f.inMeta && len(f.stack) == 1 {
		if f.off+int64(i)+1-f.metaStart > f.maxMeta {
			return f.fail(i, ErrMeta, "top-level meta larger than MaxMeta")
		}
		if err = f.emit(p[runStart : i+1]); err != nil {
			return err
		}
		f.metaWrote = f.wrote
		f.inMeta = false
		f.wrote = f.savedWrote
		// Continue as after a removed member: meta's place in the
		// document is left empty.
		f.skipping = true
		f.skipDepth = 1
		i++
		goto after
	}
	if !f.skipping {
		f.wrote = true // the parent's member holding this value was kept
	}
	i++
	goto after

popArr: // p[i] == ']'
	f.stack = f.stack[:len(f.stack)-1]
	if !f.skipping {
		f.wrote = true
	}
	i++
	goto after

done:
	i = skipSpace(p, i)
	if i == n {
		f.st = stDone
		goto out
	}
	return f.syntax(p, i, "after top-level value")

str:
	i = plainEnd(p, i)
	if i == n {
		f.st = stStr
		goto out
	}
	c = p[i]
	i++
	if c == '"' {
		if f.strNext == stColon {
			goto colon
		}
		goto after
	}
	if c != '\\' {
		return f.syntax(p, i-1, "in string literal")
	}

strEsc: // after '\', in any string; a key being decoded also collects the byte
	if i == n {
		f.st = stStrEsc
		goto out
	}
	c = p[i]
	if c == 'u' {
		i++
		f.uN = 0
		f.uVal = 0
		goto strU
	}
	if unescape[c] == 0 {
		return f.syntax(p, i, "in string escape code")
	}
	i++
	if !f.decoding {
		goto str
	}
	f.flushHigh()
	f.key = append(f.key, unescape[c])
	goto keyGrown

strU:
	for ; f.uN < 4; f.uN++ {
		if i == n {
			f.st = stStrU
			goto out
		}
		if hexVal[p[i]] < 0 {
			return f.syntax(p, i, "in \\u hexadecimal character escape")
		}
		f.uVal = f.uVal<<4 | rune(hexVal[p[i]])
		i++
	}
	if !f.decoding {
		goto str
	}
	f.appendU(f.uVal)
	goto keyGrown

keyStr: // decoding a key that has escapes or spans chunks
	if i == n {
		f.st = stKeyStr
		goto out
	}
	c = p[i]
	i++
	if c == '"' {
		f.decoding = false
		f.flushHigh()
		r = f.classify(f.key)
		goto decideKey
	}
	if c == '\\' {
		goto strEsc
	}
	if c < 0x20 {
		return f.syntax(p, i-1, "in string literal")
	}
	f.flushHigh()
	f.key = append(f.key, c)

keyGrown:
	if len(f.key) > f.keyMax {
		goto keyGiveUp
	}
	goto keyStr

numMinus:
	if i == n {
		f.st = stNumMinus
		goto out
	}
	c = p[i]
	if c == '0' {
		i++
		goto numZero
	}
	if c-'1' > 8 {
		return f.syntax(p, i, "in numeric literal")
	}
	i++

numInt:
	i = digitsEnd(p, i)
	if i == n {
		f.st = stNumInt
		goto out
	}

numZero: // also the end of the integer part
	if i == n {
		f.st = stNumZero
		goto out
	}
	c = p[i]
	if c == '.' {
		i++
		goto numDot
	}
	if c == 'e' || c == 'E' {
		i++
		goto numExp0
	}
	goto after

numDot: // after '.'
	f.inExp = false

numDigit: // a digit must follow: after '.', or after 'e' and its sign
	if i == n {
		f.st = stNumDigit
		goto out
	}
	if p[i]-'0' > 9 {
		if f.inExp {
			return f.syntax(p, i, "in exponent of numeric literal")
		}
		return f.syntax(p, i, "after decimal point in numeric literal")
	}
	i++

numMore: // fraction or exponent digits
	i = digitsEnd(p, i)
	if i == n {
		f.st = stNumMore
		goto out
	}
	if c = p[i]; !f.inExp && (c == 'e' || c == 'E') {
		i++
		goto numExp0
	}
	goto after

numExp0: // after 'e'
	f.inExp = true
	if i == n {
		f.st = stNumExp0
		goto out
	}
	if c = p[i]; c == '+' || c == '-' {
		i++
	}
	goto numDigit

litStart: // p[i] is the first letter of f.lit
	if n-i >= len(f.lit) && string(p[i:i+len(f.lit)]) == f.lit {
		i += len(f.lit)
		goto after
	}
	f.litN = 0

lit:
	for ; f.litN < len(f.lit); f.litN++ {
		if i == n {
			f.st = stLit
			goto out
		}
		if p[i] != f.lit[f.litN] {
			return f.syntax(p, i, "in literal "+f.lit+" (expecting "+strconv.QuoteRune(rune(f.lit[f.litN]))+")")
		}
		i++
	}
	goto after

out: // p is used up
	if f.inMeta && f.off+int64(n)-f.metaStart > f.maxMeta {
		return f.fail(n, ErrMeta, "top-level meta larger than MaxMeta")
	}
	if f.skipping {
		return nil
	}
	if f.holding {
		return f.carryHold(p, runStart)
	}
	return f.emit(p[runStart:n])
}
