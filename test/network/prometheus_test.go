package network

// A real Prometheus (Debian's prometheus package) scrapes the gateway and
// answers PromQL over the game's metrics: a named server's players, and a
// network's sum, as docs/observability.md writes the queries.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// startPrometheus starts Prometheus on a free loopback port, scraping the
// targets every second, with nothing kept after the test; it skips the
// test where there is no prometheus, unless STATUSGATE_REQUIRE_PROMETHEUS
// is set. It returns the base URL of its HTTP API, once it is ready.
func startPrometheus(t *testing.T, targets ...string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("STATUSGATE_REQUIRE_PROMETHEUS") == "" {
			t.Skip("needs prometheus (apt-get install prometheus): " + err.Error() + "; STATUSGATE_REQUIRE_PROMETHEUS=1 makes this a failure")
		}
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	list, _ := json.Marshal(targets)
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: statusgate\n    static_configs:\n      - targets: %s\n", list)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port),
		"--log.level=warn")
	out, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("prometheus's log:\n%s", log)
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	fixture.WaitEvery(t, "prometheus ready", 100*time.Millisecond, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(out.Name())
			t.Fatalf("prometheus exited:\n%s", log)
		default:
		}
		res, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return base
}

// promQuery is the value of the PromQL expression q, an instant vector of
// one sample, as Prometheus answers it now; ok false while it has none.
func promQuery(t *testing.T, base, q string) (float64, bool) {
	t.Helper()
	res, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil || ans.Status != "success" {
		t.Fatalf("query %s: %v %s %s", q, err, ans.Status, ans.Error)
	}
	if len(ans.Data.Result) != 1 {
		return 0, false
	}
	s, _ := ans.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// TestGameMetricsPrometheus: a real Prometheus scrapes the gateway of three
// frozen simulated servers, and reads back through its HTTP API the
// players online of a named server and the network's sum, equal to the
// servers' own counts.
func TestGameMetricsPrometheus(t *testing.T) {
	ms, config := gameNetwork(t, false)
	LoadCaddyfile(t, config)
	online := map[string]float64{}
	total := 0.0
	for _, m := range ms {
		online[m.ID] = num(t, direct(t, m, "status")["minecraft"])
		total += online[m.ID]
	}
	admin, err := url.Parse(AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	base := startPrometheus(t, admin.Host)

	var lobby, network float64
	fixture.WaitEvery(t, "lobby's players in Prometheus", 200*time.Millisecond, func() bool {
		var ok bool
		lobby, ok = promQuery(t, base, `minecraft_players_online{server="lobby"}`)
		return ok
	})
	if lobby != online["lobby"] {
		t.Errorf(`minecraft_players_online{server="lobby"} = %v in Prometheus, want lobby's own %v`, lobby, online["lobby"])
	}
	const sum = `sum by (network) (minecraft_players_online * on (server) group_left (network) caddy_http_statusgate_network_member_info{network="main"})`
	fixture.WaitEvery(t, "the network's sum in Prometheus", 200*time.Millisecond, func() bool {
		var ok bool
		network, ok = promQuery(t, base, sum)
		return ok
	})
	if network != total {
		t.Errorf("%s = %v, want the three servers' %v (%v)", sum, network, total, online)
	}
	// Asked until it holds: a scrape that outlived Prometheus' scrape
	// timeout on a busy machine leaves every series stale until the next.
	fixture.WaitEvery(t, "three servers up in Prometheus", 200*time.Millisecond, func() bool {
		up, ok := promQuery(t, base, `count(minecraft_up == 1)`)
		return ok && up == 3
	})
	// Every query of the dashboard and of the docs is one Prometheus takes.
	exprs, _ := dashboardQueries(t)
	vars := strings.NewReplacer("$server", ".*", "$network", ".*", "$__rate_interval", "1m")
	for _, q := range append(exprs, docQueries(t)...) {
		promQueryValid(t, base, vars.Replace(q))
	}
}

// promQueryValid fails the test unless Prometheus takes the query q.
func promQueryValid(t *testing.T, base, q string) {
	t.Helper()
	res, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans struct{ Status, Error string }
	if err := json.NewDecoder(res.Body).Decode(&ans); err != nil || ans.Status != "success" {
		t.Errorf("query %s: %v %s %s", q, err, ans.Status, ans.Error)
	}
}
