package rig

import (
	"bytes"
	"maps"
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
	return ScrapeSeries(t, url, "caddy_http_statusgate_")
}

// ScrapeSeries reads the series whose names start with one of prefixes
// from the metrics at url, which must answer 200 with a valid exposition;
// and the whole text.
func ScrapeSeries(t testing.TB, url string, prefixes ...string) (map[string]float64, bytes.Buffer) {
	t.Helper()
	var text bytes.Buffer
	res, err := AdminClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := text.ReadFrom(res.Body); err != nil || res.StatusCode != 200 {
		t.Fatalf("scrape %s: %d, %v: %s", url, res.StatusCode, err, Clip(text.Bytes()))
	}
	got := map[string]float64{}
	for _, prefix := range prefixes {
		series, err := scrape.Text(bytes.NewReader(text.Bytes()), prefix)
		if err != nil {
			t.Fatalf("scrape %s: %v", url, err)
		}
		maps.Copy(got, series)
	}
	return got, text
}
