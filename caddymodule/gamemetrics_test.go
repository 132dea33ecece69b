package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestGameMetricsCaddyfile: the global option's game_metrics line, as the
// app's JSON, and its mistakes with their line.
func TestGameMetricsCaddyfile(t *testing.T) {
	adapt := func(line string) (string, error) {
		input := "{\n\tstatusgate {\n\t\tserver lobby 10.0.0.3:8080\n\t\t" + line + "\n\t}\n}\n:8080 {\n\tstatusgate {\n\t\tserver lobby\n\t}\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
		if err != nil {
			return "", err
		}
		var cfg struct {
			Apps struct {
				Statusgate struct {
					GameMetrics json.RawMessage `json:"game_metrics"`
				} `json:"statusgate"`
			} `json:"apps"`
		}
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		return string(cfg.Apps.Statusgate.GameMetrics), nil
	}
	for line, want := range map[string]string{
		"game_metrics off": `{"off":true}`,
		"game_metrics on":  `{}`,
		"game_metrics {\n\t\t\tmax_worlds 8\n\t\t\tentity_types\n\t\t}": `{"max_worlds":8,"entity_types":true}`,
	} {
		got, err := adapt(line)
		if err != nil || got != want {
			t.Errorf("%q: %s, %v; want %s", line, got, err, want)
		}
	}
	for line, want := range map[string]string{
		"game_metrics maybe":                            "'maybe' is not on, off, true or false",
		"game_metrics {\n\t\t\tmax_world 8\n\t\t}":      "unrecognized subdirective 'max_world'; did you mean max_worlds?",
		"game_metrics {\n\t\t\tmax_worlds 0\n\t\t}":     "max_worlds: '0' is not a number of worlds",
		"game_metrics off {\n\t\t\tentity_types\n\t\t}": "a block of options for metrics that are off",
		"game_metrics\n\t\tgame_metrics off":            "given twice",
	} {
		if _, err := adapt(line); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Caddyfile:") {
			t.Errorf("%q: %v, want an error with %q and its line", line, err, want)
		}
	}
}
