package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestEveryFamilyDocumented: every metric family the gateway registers,
// with every unit in use (a busy guard, a live stream, each counter moved
// once), is named in docs/observability.md, so that an operator who meets
// a series in a scrape finds what it counts, its idle floor and its reasons.
// A new family fails this test until the page says what it is.
func TestEveryFamilyDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	m.ExportGuard(busyGuard(t, "g"))
	status := m.Endpoint("status")
	status.Count(Served)
	status.StreamOpened()
	status.EventSent()
	status.ViewerCut()
	status.FieldsRemoved([]string{"op"})
	status.FilterBytes(2, 1)
	m.StreamRefused("max_streams")
	m.KeyUsed(0)
	m.KeyRefused(0)
	m.UnknownKey()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) < 20 {
		t.Fatalf("%d families gathered, fewer than the gateway has: the test no longer sees them all", len(families))
	}
	for _, f := range families {
		if !strings.Contains(string(doc), "`"+f.GetName()+"`") {
			t.Errorf("docs/observability.md does not name the family `%s` (%s)", f.GetName(), f.GetHelp())
		}
	}
}
