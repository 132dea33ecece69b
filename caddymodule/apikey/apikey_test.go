package apikey

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, name := range []string{"a", "discord-bot", "website", "Key_2", "-", strings.Repeat("x", MaxNameLength)} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	for name, want := range map[string]string{
		"":                                   "invalid name (letters, digits, _ and -)",
		"x y":                                "invalid name (letters, digits, _ and -)",
		"bot.example":                        "invalid name (letters, digits, _ and -)",
		"sha256:ab":                          "invalid name (letters, digits, _ and -)",
		"{env.X}":                            "invalid name (letters, digits, _ and -)",
		"ümlaut":                             "invalid name (letters, digits, _ and -)",
		strings.Repeat("x", MaxNameLength+1): "invalid name (at most 64 characters)",
		"sg_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8": "invalid name (it has the form of a secret from caddy statusgate-key)",
	} {
		err := ValidateName(name)
		if err == nil || err.Error() != want {
			t.Errorf("ValidateName(%q) = %v, want %q", name, err, want)
		}
	}
}

func TestDigest(t *testing.T) {
	// The SHA-256 of "abc" from FIPS 180-2, appendix B.1.
	const abc = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := Digest("abc"); got != abc {
		t.Fatalf("Digest(abc) = %s, want %s", got, abc)
	}
	for _, text := range []string{
		abc,
		"sha256:" + strings.ToUpper(abc[7:]),
		"sha256:BA7816bf8f01CFEA414140de5dae2223b00361a396177a9cb410ff61f20015AD",
	} {
		d, err := ParseDigest(text)
		if err != nil {
			t.Fatalf("ParseDigest(%s): %v", text, err)
		}
		if got := DigestPrefix + hex.EncodeToString(d[:]); got != abc {
			t.Errorf("ParseDigest(%s) = %s, want %s", text, got, abc)
		}
	}
}

func TestParseDigestErrors(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	for text, want := range map[string]string{
		"sha256:12ab":                      "malformed digest 'sha256:12ab' (want sha256: and 64 hex digits, got 4)",
		"sha256:":                          "malformed digest 'sha256:' (want sha256: and 64 hex digits, got 0)",
		"sha256:" + hex64[:63]:             "malformed digest 'sha256:01234567…' (want sha256: and 64 hex digits, got 63)",
		"sha256:" + hex64 + "0":            "malformed digest 'sha256:01234567…' (want sha256: and 64 hex digits, got 65)",
		"sha256:" + hex64[:62] + "g0":      "malformed digest 'sha256:01234567…' (want sha256: and 64 hex digits; character 70 is not a hex digit)",
		"sha256:12 " + hex64[:61]:          "malformed digest 'sha256:12…' (want sha256: and 64 hex digits; character 10 is not a hex digit)",
		"sha256:sg_the-secret-itself-1234": "malformed digest 'sha256:…' (want sha256: and 64 hex digits; character 8 is not a hex digit)",
		"SHA256:" + hex64:                  "malformed digest (want sha256: and 64 hex digits)",
		hex64:                              "malformed digest (want sha256: and 64 hex digits)",
	} {
		_, err := ParseDigest(text)
		if err == nil || err.Error() != want {
			t.Errorf("ParseDigest(%q) = %v,\nwant %q", text, err, want)
		}
	}
}

// A secret pasted after "sha256:" by mistake must not end up in the error,
// which Caddy prints and logs.
func TestParseDigestErrorHidesSecret(t *testing.T) {
	for _, secret := range []string{
		"0123456789abcdef0123456789abcdef",    // a hex secret: all but its first 8 digits hidden
		"deadbeefcafe0123deadbeefcafe0123ff",  // ditto
		"sg_9Xq2-LmN0pQrStUvWxYz0123456789ab", // a generated key
	} {
		_, err := ParseDigest("sha256:" + secret)
		if err == nil {
			t.Fatalf("ParseDigest accepted %q", secret)
		}
		if strings.Contains(err.Error(), secret[8:]) || strings.Contains(err.Error(), secret[digestShown:digestShown+4]) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, k := range []Key{
		{Secret: "pla1n-secret-0123456789"},
		{Secret: "{env.STATUSGATE_KEY}"},
		{Secret: "{file./etc/caddy/bot.key}"},
		{Name: "discord-bot", Secret: Digest("x")},
		{Name: "website", Secret: "{env.WEB_KEY_DIGEST}"}, // a digest may come whole from a placeholder
	} {
		if err := k.Validate(); err != nil {
			t.Errorf("%+v: %v", k, err)
		}
	}
	for _, c := range []struct {
		k    Key
		want string
	}{
		{Key{Secret: ""}, "empty key"},
		{Key{Secret: " \t"}, "empty key"},
		{Key{Name: "a b", Secret: "s"}, "invalid name (letters, digits, _ and -)"},
		{Key{Name: "bot", Secret: "sha256:12ab"}, "malformed digest 'sha256:12ab' (want sha256: and 64 hex digits, got 4)"},
		// Not a digest in pieces: checked as written, before expansion.
		{Key{Secret: "sha256:{env.X}"}, "malformed digest 'sha256:…' (want sha256: and 64 hex digits; character 8 is not a hex digit)"},
		// A name with its secret forgotten, white space around it or not.
		{Key{Secret: "discord-bot-production"}, "one word that reads like a name, with no secret"},
		{Key{Secret: " website\t"}, "one word that reads like a name, with no secret"},
	} {
		err := c.k.Validate()
		if err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.k, err, c.want)
		}
	}
}

// jsonRoundTrip decodes in, checks it gives want, and encodes it back, which
// must give out.
func jsonRoundTrip(t *testing.T, in string, want []Key, out string) {
	t.Helper()
	var keys []Key
	if err := json.Unmarshal([]byte(in), &keys); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("decoded %+v,\nwant %+v", keys, want)
	}
	b, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != out {
		t.Errorf("encoded as %s,\nwant %s", b, out)
	}
}

// Configs written before keys had names are lists of strings; they decode,
// and encode back to exactly the same text, so `caddy adapt` output for
// unnamed keys does not change.
func TestJSONStringsStayStrings(t *testing.T) {
	const in = `["secret1","{env.X}","sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"]`
	jsonRoundTrip(t, in, []Key{
		{Secret: "secret1"},
		{Secret: "{env.X}"},
		{Secret: "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}, in)
}

func TestJSONNamed(t *testing.T) {
	jsonRoundTrip(t,
		`["plain",{"name":"discord-bot","key":"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},{"key":"{env.Y}"}, {"key":"s2","name":"web"}]`,
		[]Key{
			{Secret: "plain"},
			{Name: "discord-bot", Secret: "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
			{Secret: "{env.Y}"},
			{Name: "web", Secret: "s2"},
		},
		// An object without a name becomes a string: the same key, the shorter form.
		`["plain",{"name":"discord-bot","key":"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},"{env.Y}",{"name":"web","key":"s2"}]`)
}

func TestJSONErrors(t *testing.T) {
	const secret = "hunter2-very-secret"
	for in, want := range map[string]string{
		`42`:             `a key is a string or an object {"name": …, "key": …}`,
		`null`:           `a key is a string or an object {"name": …, "key": …}`,
		`[]`:             `a key is a string or an object {"name": …, "key": …}`,
		`{"name":"bot"}`: `key object: missing "key"`,
		`{"name":"bot","key":"` + secret + `","nmae":"x"}`: `key object: json: unknown field "nmae"`,
		`{"name":"bot","key":7}`:                           `key object: json: cannot unmarshal number into Go struct field keyObject.key of type string`,
		`{"name":["bot"],"key":"` + secret + `"}`:          `key object: json: cannot unmarshal array into Go struct field keyObject.name of type string`,
	} {
		var k Key
		err := json.Unmarshal([]byte(in), &k)
		if err == nil || err.Error() != want {
			t.Errorf("Unmarshal(%s) = %v,\nwant %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}

func TestDefaultName(t *testing.T) {
	if got := DefaultName(1); got != "key-1" {
		t.Errorf("DefaultName(1) = %q", got)
	}
	if got := DefaultName(12); got != "key-12" {
		t.Errorf("DefaultName(12) = %q", got)
	}
	if err := ValidateName(DefaultName(1000)); err != nil {
		t.Errorf("a default name is not a valid name: %v", err)
	}
}

// A key's scope, cap and share are the object form's "endpoints",
// "max_in_flight" and "max_held"; a key with any stays an object, named or
// not.
func TestJSONScoped(t *testing.T) {
	const d = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	jsonRoundTrip(t,
		`[{"name":"bot","key":"`+d+`","endpoints":["status","bans"],"max_in_flight":2,"max_held":16777216},{"key":"s1","endpoints":["status"]},{"key":"s2","max_in_flight":0},{"key":"s3","max_held":0},{"key":"s4","max_held":8388608}]`,
		[]Key{
			{Name: "bot", Secret: d, Endpoints: []string{"status", "bans"}, MaxInFlight: 2, limitGiven: true, MaxHeld: 16 << 20, heldGiven: true},
			{Secret: "s1", Endpoints: []string{"status"}},
			{Secret: "s2", limitGiven: true},
			{Secret: "s3", heldGiven: true},
			{Secret: "s4", MaxHeld: 8 << 20, heldGiven: true},
		},
		`[{"name":"bot","key":"`+d+`","endpoints":["status","bans"],"max_in_flight":2,"max_held":16777216},{"key":"s1","endpoints":["status"]},{"key":"s2","max_in_flight":0},{"key":"s3","max_held":0},{"key":"s4","max_held":8388608}]`)
}

// An empty scope, a cap and a share below 1 are refused, the explicit 0
// included, and so is null.
func TestValidateScope(t *testing.T) {
	for in, want := range map[string]string{
		`{"key":"q3z-q3z-q3z-q3z-q3z","endpoints":[]}`:       "endpoints: empty list (leave it out for every endpoint)",
		`{"key":"q3z-q3z-q3z-q3z-q3z","max_in_flight":0}`:    "max_in_flight: 0 is not a whole number of at least 1",
		`{"key":"q3z-q3z-q3z-q3z-q3z","max_in_flight":-3}`:   "max_in_flight: -3 is not a whole number of at least 1",
		`{"key":"q3z-q3z-q3z-q3z-q3z","max_held":0}`:         "max_held: 0 is not a size: write bytes, at least 1, or leave max_held out for the key's default share",
		`{"key":"q3z-q3z-q3z-q3z-q3z","max_held":-1}`:        "max_held: -1 is not a size: write bytes, at least 1, or leave max_held out for the key's default share",
		`{"key":"q3z-q3z-q3z-q3z-q3z","max_held":null}`:      "max_held: null is not a size: leave max_held out for the key's default share, or write bytes, at least 1",
		`{"key":"q3z-q3z-q3z-q3z-q3z","max_held":1}`:         "",
		`{"key":"q3z-q3z-q3z-q3z-q3z","endpoints":["bans"]}`: "",
	} {
		var k Key
		if err := json.Unmarshal([]byte(in), &k); err != nil {
			t.Fatal(err)
		}
		err := k.Validate()
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("%s: Validate() = %v, want %q", in, err, want)
		}
	}
}

// TestKeyJSONTags: Key's json tags, which Caddy's documentation shows, name
// the members its object form really has (keyObject, what MarshalJSON and
// UnmarshalJSON use), so that the docs cannot show Name and Secret where the
// config says "name" and "key".
func TestKeyJSONTags(t *testing.T) {
	tags := func(typ reflect.Type) map[string]string {
		m := map[string]string{}
		for f := range typ.Fields() {
			if f.IsExported() {
				m[f.Name] = f.Tag.Get("json")
			}
		}
		return m
	}
	got, want := tags(reflect.TypeFor[Key]()), tags(reflect.TypeFor[keyObject]())
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Key's json tags %v, the object form's %v", got, want)
	}
	// And the tags do not change what the methods write.
	b, err := json.Marshal(Key{Name: "bot", Secret: "s", MaxInFlight: 2, MaxHeld: 1 << 20})
	if err != nil || string(b) != `{"name":"bot","key":"s","max_in_flight":2,"max_held":1048576}` {
		t.Errorf("Marshal = %s %v", b, err)
	}
}

// TestReadsLikeName checks the rule that tells a name whose secret was
// forgotten from a secret written alone.
func TestReadsLikeName(t *testing.T) {
	for _, s := range []string{
		"website", "bot", "k", "s3cret", "a1b2c3", // shorter than 16: whatever they are
		"discord-bot-production", "DISCORD_BOT_PRODUCTION", "discordBotProduction", "DiscordBot-Production",
		"discord-bot-production-2", "staff2024-dashboard", "my_website_key_v2", "demo-key-change-me-0123",
		"correct-horse-battery-staple", // a passphrase of plain words: it needs a name
		"0123456789012345678",
	} {
		if !ReadsLikeName(s) {
			t.Errorf("ReadsLikeName(%q) = false, want true", s)
		}
	}
	for _, s := range []string{
		"sg_28LTmLX-g4RmCaLRYD3bcU1a2CNPVK_HvJJ-lDotZCI", // generated
		Digest("x"), "{env.STATUSGATE_KEY}", "{file./run/secrets/key}", "pre-{env.X}",
		"3f9a0c1b2d4e5f60a1b2c3d4e5f60718",     // hex
		"550e8400-e29b-41d4-a716-446655440000", // a UUID
		"Ahng4aiph3ohChoo", "s3cret-s3cret-s3cret", "Qx7Zk9Wv3Jp8Yt5R",
		"HTTPServerProduction",                      // not one of the forms of a word
		"q83vEjRWeJq83vEjRWeJ+w==", "a b c", "p@ss", // not a name's characters
		"",
	} {
		if ReadsLikeName(s) {
			t.Errorf("ReadsLikeName(%q) = true, want false", s)
		}
	}
}

// TestRandomSecretsAlonePass measures the rule on random strings of the
// alphabets secrets are made of, with a fixed seed: at 16 characters
// hardly any reads like a name, at 32 none does.
func TestRandomSecretsAlonePass(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, a := range []struct{ name, alphabet string }{
		{"hex", "0123456789abcdef"},
		{"letters and digits", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"},
		{"base64url", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"},
	} {
		for _, c := range []struct {
			length, most int // at most `most` per 10,000 read like names
		}{{16, 50}, {32, 0}} {
			names := 0
			for range 10000 {
				b := make([]byte, c.length)
				for i := range b {
					b[i] = a.alphabet[r.IntN(len(a.alphabet))]
				}
				if ReadsLikeName(string(b)) {
					names++
				}
			}
			if names > c.most {
				t.Errorf("%s, %d characters: %d of 10,000 read like names, want at most %d", a.name, c.length, names, c.most)
			}
		}
	}
}
