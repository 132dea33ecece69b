// Package scrape reads Prometheus metrics into a flat map, series by series,
// so that tests can assert exact counts: `name{label="value",…}` → value,
// labels in the order the registry sorts them (by name). It serves the unit
// tests of the metrics (a registry's Gather) and the integration tests (the
// text a running Caddy's /metrics endpoint serves).
package scrape

import (
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series flattens the families whose names start with prefix. Counters,
// gauges and untyped metrics give their value; a family of any other type
// is an error (statusgate has none).
func Series(families []*dto.MetricFamily, prefix string) (map[string]float64, error) {
	got := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			key := f.GetName()
			if len(m.GetLabel()) > 0 {
				labels := make([]string, 0, len(m.GetLabel()))
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				got[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				got[key] = m.GetGauge().GetValue()
			case m.Untyped != nil:
				got[key] = m.GetUntyped().GetValue()
			default:
				return nil, fmt.Errorf("%s is neither a counter nor a gauge", key)
			}
		}
	}
	return got, nil
}

// Text is Series for the Prometheus text format, as a /metrics endpoint
// serves it.
func Text(r io.Reader, prefix string) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	families := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		families = append(families, f)
	}
	return Series(families, prefix)
}
