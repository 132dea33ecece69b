package gamemetrics

// This file reads the answers of a game server's endpoints into the
// samples they give: the figures as the plugin writes them, in base units,
// with the label values the backend supplies (world names, versions,
// entity types) made valid and bounded.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statusgate/statusgate/caddymodule/internal/network"
)

// sample is one series of a server, but for its server label: its family
// and the values of its other labels.
type sample struct {
	desc   *prometheus.Desc
	value  float64
	labels []string
}

// reading is what one answer of an endpoint said: its samples and the
// time of its data, or why there are none.
type reading struct {
	err     error
	samples []sample
	at      float64 // the data's time, Unix seconds: meta.cachedAt, else meta.updatedAt
}

// Options are what the families include beyond the default set.
type Options struct {
	// MaxWorlds is how many worlds of a server have series of their own;
	// the others are summed under world="_other". Default (0): 32.
	MaxWorlds int
	// EntityTypes adds minecraft_world_entities_by_type. Default: off.
	EntityTypes bool
}

// DefaultMaxWorlds is MaxWorlds's default.
const DefaultMaxWorlds = 32

// OtherWorld is the world label of the worlds past MaxWorlds, summed, and
// of those whose name is empty or this very word.
const OtherWorld = "_other"

// MaxLabel is the most bytes of a label value the backend supplies; a
// longer one is cut at a character's start.
const MaxLabel = 128

func (o Options) maxWorlds() int {
	if o.MaxWorlds > 0 {
		return o.MaxWorlds
	}
	return DefaultMaxWorlds
}

// errInitializing is why a snapshot station's answer is no data: the
// plugin has not taken its first snapshot (the server is starting).
var errInitializing = errors.New("the plugin is still initializing: no snapshot yet")

// envelope is the plugin's success envelope, data kept raw.
type envelope struct {
	OK   *bool           `json:"ok"`
	Data json.RawMessage `json:"data"`
	Meta struct {
		UpdatedAt json.Number `json:"updatedAt"`
		CachedAt  json.Number `json:"cachedAt"`
	} `json:"meta"`
}

// open reads body's envelope: the data, and its time in Unix seconds.
func open(body []byte) (json.RawMessage, float64, error) {
	var env envelope
	if err := decode(body, &env); err != nil {
		return nil, 0, err
	}
	if env.OK == nil || !*env.OK {
		return nil, 0, errors.New("ok is not true")
	}
	var init struct {
		Status string `json:"status"`
	}
	if bytes.Contains(env.Data, []byte(`"initializing"`)) && decode(env.Data, &init) == nil && init.Status == "initializing" {
		return nil, 0, errInitializing
	}
	ms, err := strconv.ParseInt(env.Meta.CachedAt.String(), 10, 64)
	if err != nil {
		if ms, err = strconv.ParseInt(env.Meta.UpdatedAt.String(), 10, 64); err != nil {
			return nil, 0, errors.New("meta has neither cachedAt nor updatedAt as a time")
		}
	}
	return env.Data, float64(ms) / 1000, nil
}

// decode reads the JSON value b into v, numbers as json.Number; strings
// that are not valid UTF-8 get U+FFFD in place of their bad bytes.
func decode(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return errors.New("missing")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// number is n as a float64 when it is a finite number within [lo, hi];
// ok false otherwise (absent, null, out of bounds: no sample).
func number(n *json.Number, lo, hi float64) (float64, bool) {
	if n == nil {
		return 0, false
	}
	v, err := n.Float64()
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return 0, false
	}
	return v, true
}

// read reads the answer body of ep, at now, into its samples.
func read(ep Endpoint, body []byte, now time.Time, o Options) reading {
	if ep == Status {
		// The network's reading of a status, so that a server the network
		// leaves out is down here too.
		s, err := network.ParseStatus(body)
		if err == nil {
			err = s.Current(now)
		}
		if err != nil {
			return reading{err: err}
		}
		return reading{at: float64(s.At) / 1000, samples: []sample{{desc: descPlayersOnline, value: float64(s.Online)}}}
	}
	data, at, err := open(body)
	if err != nil {
		return reading{err: err}
	}
	if t := time.Unix(int64(at), 0); t.Before(network.Epoch) || t.After(now.Add(network.Skew)) {
		return reading{err: fmt.Errorf("its time, %v, is no time of a running server", t.UTC().Format(time.RFC3339))}
	}
	r := reading{at: at}
	switch ep {
	case Performance:
		r.samples, err = readPerformance(data, at)
	case Entities:
		r.samples, err = readEntities(data, o)
	case Worlds:
		r.samples, err = readWorlds(data, o)
	case ServerInfo:
		r.samples, err = readServer(data)
	}
	if err != nil {
		return reading{err: fmt.Errorf("%s: %w", ep, err)}
	}
	return r
}

// Sanity bounds: a figure past them is a unit gone wrong (Paper once gave
// the average tick in nanoseconds), not a graph to draw.
const (
	maxTPS      = 1000    // /tick rate goes up to 10000 ticks per second; no server keeps that
	maxTickSecs = 60      // an average tick of a minute is a stopped server
	maxBytes    = 1 << 50 // a petabyte of heap
	maxCount    = 1 << 40
)

func readPerformance(data json.RawMessage, at float64) ([]sample, error) {
	var p struct {
		TPS    map[string]*json.Number `json:"tps"`
		TickMs *json.Number            `json:"averageTickTimeMs"`
		Memory map[string]*json.Number `json:"memory"`
		JVM    map[string]any          `json:"jvm"`
	}
	if err := decode(data, &p); err != nil {
		return nil, err
	}
	var out []sample
	if v, ok := number(p.TPS["1m"], 0, maxTPS); ok {
		out = append(out, sample{desc: descTPS, value: v})
	}
	if v, ok := number(p.TickMs, 0, maxTickSecs*1000); ok {
		out = append(out, sample{desc: descTick, value: v / 1000})
	}
	for name, d := range map[string]*prometheus.Desc{"usedBytes": descHeapUsed, "totalBytes": descHeapCommitted, "maxBytes": descHeapMax} {
		if v, ok := number(p.Memory[name], 0, maxBytes); ok {
			out = append(out, sample{desc: d, value: v})
		}
	}
	if n, ok := p.JVM["uptimeMs"].(json.Number); ok {
		if up, ok := number(&n, 0, math.MaxInt64); ok && up/1000 <= at {
			out = append(out, sample{desc: descStartTime, value: math.Round(at - up/1000)})
		}
	}
	return out, nil
}

// worldSums adds values by world, in the order the worlds come, the
// first MaxWorlds names their own and the rest summed under OtherWorld;
// two names that clean up to the same value are one world.
type worldSums struct {
	max    int
	order  []string
	values map[string][]float64
	n      int // values per world
}

func newWorldSums(max, n int) *worldSums {
	return &worldSums{max: max, values: map[string][]float64{}, n: n}
}

// key is the world label of name: its own, or OtherWorld past the cap.
func (w *worldSums) key(name string) string {
	name = Clean(name)
	if name == "" || name == OtherWorld {
		return OtherWorld
	}
	if _, ok := w.values[name]; ok {
		return name
	}
	if len(w.order) >= w.max {
		return OtherWorld
	}
	w.order = append(w.order, name)
	w.values[name] = make([]float64, w.n)
	return name
}

// add adds v to value i of the world name, and reports its label.
func (w *worldSums) add(name string, i int, v float64) string {
	k := w.key(name)
	if w.values[k] == nil {
		w.values[k] = make([]float64, w.n) // OtherWorld's, made when first needed
	}
	w.values[k][i] += v
	return k
}

// worlds are the labels in order, OtherWorld last if any world went there.
func (w *worldSums) worlds() []string {
	out := append([]string(nil), w.order...)
	if _, ok := w.values[OtherWorld]; ok {
		out = append(out, OtherWorld)
	}
	return out
}

func readEntities(data json.RawMessage, o Options) ([]sample, error) {
	var e struct {
		Worlds *[]struct {
			World  string                  `json:"world"`
			Total  *json.Number            `json:"total"`
			ByType map[string]*json.Number `json:"byType"`
		} `json:"worlds"`
	}
	if err := decode(data, &e); err != nil {
		return nil, err
	}
	if e.Worlds == nil {
		return nil, errors.New("no worlds list")
	}
	sums := newWorldSums(o.maxWorlds(), 1)
	// By type: (world label, type) → count. The types are the game's
	// EntityType enum, a bounded set, lower-cased as the game's registry
	// keys are; cleaned as any label value from the backend.
	type wt struct{ world, typ string }
	byType := map[wt]float64{}
	var typeOrder []wt
	for _, w := range *e.Worlds {
		v, ok := number(w.Total, 0, maxCount)
		if !ok {
			continue
		}
		k := sums.add(w.World, 0, v)
		if !o.EntityTypes {
			continue
		}
		for typ, n := range w.ByType {
			c, ok := number(n, 0, maxCount)
			if !ok {
				continue
			}
			key := wt{k, Clean(strings.ToLower(typ))}
			if _, seen := byType[key]; !seen {
				typeOrder = append(typeOrder, key)
			}
			byType[key] += c
		}
	}
	var out []sample
	for _, w := range sums.worlds() {
		out = append(out, sample{desc: descWorldEntities, value: sums.values[w][0], labels: []string{w}})
	}
	for _, k := range typeOrder {
		out = append(out, sample{desc: descEntitiesByType, value: byType[k], labels: []string{k.world, k.typ}})
	}
	return out, nil
}

func readWorlds(data json.RawMessage, o Options) ([]sample, error) {
	var ws struct {
		Worlds *[]struct {
			Name         string       `json:"name"`
			Environment  string       `json:"environment"`
			LoadedChunks *json.Number `json:"loadedChunks"`
		} `json:"worlds"`
	}
	if err := decode(data, &ws); err != nil {
		return nil, err
	}
	if ws.Worlds == nil {
		return nil, errors.New("no worlds list")
	}
	sums := newWorldSums(o.maxWorlds(), 1)
	env := map[string]string{}
	for _, w := range *ws.Worlds {
		v, ok := number(w.LoadedChunks, 0, maxCount)
		if !ok {
			v = 0
		}
		k := sums.add(w.Name, 0, v)
		if _, seen := env[k]; !seen && k != OtherWorld {
			env[k] = Clean(strings.ToLower(w.Environment))
		}
	}
	var out []sample
	for _, w := range sums.worlds() {
		out = append(out, sample{desc: descWorldChunks, value: sums.values[w][0], labels: []string{w}})
		if w != OtherWorld {
			out = append(out, sample{desc: descWorldInfo, value: 1, labels: []string{w, env[w]}})
		}
	}
	return out, nil
}

func readServer(data json.RawMessage) ([]sample, error) {
	var s struct {
		Brand            string       `json:"brand"`
		Version          string       `json:"version"`
		MinecraftVersion string       `json:"minecraftVersion"`
		MaxPlayers       *json.Number `json:"maxPlayers"`
	}
	if err := decode(data, &s); err != nil {
		return nil, err
	}
	out := []sample{{desc: descInfo, value: 1, labels: []string{Clean(s.Brand), Clean(s.Version), Clean(s.MinecraftVersion)}}}
	if v, ok := number(s.MaxPlayers, 0, maxCount); ok {
		out = append(out, sample{desc: descPlayersMax, value: v})
	}
	return out, nil
}

// Clean is s as a label value: valid UTF-8 (each run of bad bytes U+FFFD), at most
// MaxLabel bytes, cut at a character's start. (encoding/json has already
// replaced bad bytes in what it decodes; this is for any other source.)
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxLabel {
		return s
	}
	cut := MaxLabel
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
