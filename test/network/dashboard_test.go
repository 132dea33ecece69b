package network

// The Grafana dashboard in examples/grafana and the queries of
// docs/observability.md's "The game's metrics": every query names only
// series the gateway exports, checked against a real Caddy's /metrics.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// dashboardFile is the dashboard that ships in examples/.
var dashboardFile = filepath.Join(RepoRoot, "examples", "grafana", "statusgate-minecraft.json")

// dashboardQueries are the PromQL expressions of the dashboard's panels,
// and the label_values queries of its variables.
func dashboardQueries(t *testing.T) (exprs, variables []string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Type  string
				Query json.RawMessage
			}
		}
		Panels []struct {
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		var q struct{ Query string }
		if v.Type == "query" && json.Unmarshal(v.Query, &q) == nil {
			variables = append(variables, q.Query)
		}
	}
	if len(exprs) == 0 || len(variables) == 0 {
		t.Fatalf("%s: %d queries and %d variables", dashboardFile, len(exprs), len(variables))
	}
	return exprs, variables
}

// docQueries are the PromQL of docs/observability.md's game section: the
// lines of its promql blocks that are not comments, and the expr of its
// alert rules.
func docQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The game's metrics")
	if !ok {
		t.Fatal(`docs/observability.md has no "## The game's metrics"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var qs []string
	for _, m := range regexp.MustCompile("(?ms)^```(promql|yaml)\n(.*?)^```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(m[2], "\n") {
			line = strings.TrimSpace(line)
			switch {
			case m[1] == "promql" && line != "" && !strings.HasPrefix(line, "#"):
				qs = append(qs, line)
			case m[1] == "yaml" && strings.HasPrefix(line, "expr:"):
				qs = append(qs, strings.Trim(strings.TrimSpace(strings.TrimPrefix(line, "expr:")), "'"))
			}
		}
	}
	if len(qs) < 5 {
		t.Fatalf("docs/observability.md's game section has %d queries", len(qs))
	}
	return qs
}

// promqlWords are PromQL's functions, aggregations and keywords that the
// queries use: every other name in a query is a series'.
var promqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`sum avg min max count topk bottomk quantile stddev count_values group
		by without on ignoring group_left group_right bool and or unless offset
		rate irate increase delta deriv changes resets time timestamp abs clamp clamp_min clamp_max
		avg_over_time max_over_time min_over_time last_over_time absent absent_over_time vector scalar label_values`) {
		promqlWords[w] = true
	}
}

var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers  = regexp.MustCompile(`\{[^}]*\}`)
	ranges    = regexp.MustCompile(`\[[^\]]*\]`)
	labelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	variable  = regexp.MustCompile(`\$\{?\w+\}?`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// seriesNames are the series names q reads.
func seriesNames(q string) []string {
	for _, re := range []*regexp.Regexp{quoted, matchers, ranges, labelList, variable} {
		q = re.ReplaceAllString(q, " ")
	}
	var names []string
	for _, w := range ident.FindAllString(q, -1) {
		if !promqlWords[w] && !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	return names
}

// TestGrafanaDashboard: every query of the dashboard and of the docs'
// game section names only series a real Caddy's /metrics has, with the
// docs' demo options (entity types on), and names one at least.
func TestGrafanaDashboard(t *testing.T) {
	if got := seriesNames(`sum by (network) (minecraft_players_online * on (server) group_left (network) caddy_http_statusgate_network_member_info{network=~"$network"}) > bool 3`); !slices.Equal(got, []string{"minecraft_players_online", "caddy_http_statusgate_network_member_info"}) {
		t.Fatalf("seriesNames reads %v", got)
	}
	_, config := gameNetwork(t, false)
	config = strings.Replace(config, "\tstatusgate {\n", "\tstatusgate {\n\t\tgame_metrics {\n\t\t\tentity_types\n\t\t}\n", 1)
	LoadCaddyfile(t, config)
	exported := map[string]map[string]bool{} // name → its labels
	fixture.WaitEvery(t, "every family", 50*time.Millisecond, func() bool {
		for k := range scrapeAll(t) {
			name, labels, _ := strings.Cut(k, "{")
			if exported[name] == nil {
				exported[name] = map[string]bool{}
			}
			for _, l := range regexp.MustCompile(`(\w+)="`).FindAllStringSubmatch(labels, -1) {
				exported[name][l[1]] = true
			}
		}
		return exported["minecraft_world_entities_by_type"] != nil && exported["minecraft_start_time_seconds"] != nil
	})
	exprs, variables := dashboardQueries(t)
	for _, q := range append(exprs, docQueries(t)...) {
		ns := seriesNames(q)
		if len(ns) == 0 {
			t.Errorf("%s: names no series", q)
		}
		for _, n := range ns {
			if exported[n] == nil {
				t.Errorf("%s: %s is not a series the gateway exports", q, n)
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+), (\w+)\)$`)
	for _, v := range variables {
		m := labelValues.FindStringSubmatch(v)
		if m == nil || !exported[m[1]][m[2]] {
			t.Errorf("variable %s: not the label_values of an exported series' label", v)
		}
	}
}
