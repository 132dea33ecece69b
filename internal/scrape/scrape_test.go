package scrape

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// The same registry read both ways gives the same map, and only the
// families under the prefix.
func TestGatherAndText(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_requests_total", Help: "h"}, []string{"b", "a"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_in_flight", Help: "h"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "y_total", Help: "h"})
	reg.MustRegister(c, g, other)
	c.WithLabelValues("2", `q"uote`).Add(3)
	c.WithLabelValues("1", "z")
	g.Set(2)
	other.Inc()
	want := map[string]float64{
		`x_requests_total{a="q\"uote",b="2"}`: 3,
		`x_requests_total{a="z",b="1"}`:       0,
		`x_in_flight`:                         2,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fromGather, err := Series(families, "x_")
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	fromText, err := Text(&text, "x_")
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]map[string]float64{"Series": fromGather, "Text": fromText} {
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", name, k, g, ok, v)
			}
		}
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_seconds", Help: "h"})
	reg.MustRegister(h)
	families, _ = reg.Gather()
	if _, err := Series(families, "x_"); err == nil {
		t.Error("a histogram was read as a value")
	}
}
