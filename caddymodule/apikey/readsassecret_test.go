package apikey

import (
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// TestReadsAsSecret: random secrets in the forms operators make them
// (openssl rand -hex, base64url, UUIDs) read as secrets, so that a key line
// with two of them is refused instead of publishing the first as a name;
// names of words, with a short code among them, do not. The random bytes
// come from a fixed seed: the test gives the same answer every run.
func TestReadsAsSecret(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 1))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	uuid := func(b []byte) string {
		h := hex.EncodeToString(b[:16])
		return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	// In a fixed order: the draws are the same at every run only if the
	// forms take them in the same order (a map's is random).
	for _, f := range []struct {
		form   string
		encode func([]byte) string
	}{
		{"hex", hex.EncodeToString},
		{"base64url", base64.RawURLEncoding.EncodeToString},
		{"uuid", uuid},
	} {
		form, encode := f.form, f.encode
		for _, n := range []int{16, 24, 32} {
			missed := 0
			for range 2000 {
				if !ReadsAsSecret(encode(random(n))) {
					missed++
				}
			}
			// A short base64url string now and then is camel-cased words
			// by chance ("vClw-C1Q-OsbYofOtb_YEA"): fewer than 1 in 1000.
			if missed > 2 || missed > 0 && (form != "base64url" || n > 16) {
				t.Errorf("%d of 2000 %s secrets of %d bytes do not read as secrets", missed, form, n)
			}
		}
	}
	for _, name := range []string{"discord-bot-production", "prometheus-k8s-scraper", "grafana-agent-v2", "staff-dashboard-2024", "DISCORD_BOT_PROD_EU", "bot-a1b2c3d4", "website"} {
		if ReadsAsSecret(name) {
			t.Errorf("%s reads as a secret", name)
		}
	}
}
