package rig

import (
	"bytes"
	"testing"

	"github.com/statusgate/statusgate/internal/scrape"
)

// ScrapeAdmin fetches Caddy's admin /metrics: statusgate's series, and the
// whole text.
func ScrapeAdmin(t *testing.T) (map[string]float64, bytes.Buffer) {
	t.Helper()
	return ScrapeURL(t, AdminURL+"/metrics")
}

// ScrapeURL reads statusgate's series from the metrics at url.
func ScrapeURL(t *testing.T, url string) (map[string]float64, bytes.Buffer) {
	t.Helper()
	var text bytes.Buffer
	res, err := AdminClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := text.ReadFrom(res.Body); err != nil || res.StatusCode != 200 {
		t.Fatalf("scrape: %d, %v", res.StatusCode, err)
	}
	got, err := scrape.Text(bytes.NewReader(text.Bytes()), "caddy_http_statusgate_")
	if err != nil {
		t.Fatal(err)
	}
	return got, text
}
