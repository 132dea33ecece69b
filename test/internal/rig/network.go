package rig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/internal/harness"
)

// A network's status without Redis (docs/network.md): the gateway answers
// /api/v1/network itself from its member servers' /api/v1/status, through
// each member's own guard.

// SimMember is one simulated game server of a network: a statusgate_sim
// site of the test's config, on a port of its own, frozen (its answers are
// the same bytes every time) with a seed of its own (its players differ
// from the others').
type SimMember struct {
	ID   string
	Port int
	Name string // the sim's counters: sim.Lookup(name)
}

// NewSimMembers are the members with these ids, seeded 1, 2, ..., their
// counters named after the test.
func NewSimMembers(t *testing.T, ids ...string) []SimMember {
	t.Helper()
	ports, err := harness.FreePorts(len(ids))
	if err != nil {
		t.Fatal(err)
	}
	var ms []SimMember
	for i, id := range ids {
		ms = append(ms, SimMember{ID: id, Port: ports[i], Name: fmt.Sprintf("%s-%s", t.Name(), id)})
	}
	return ms
}

func (m SimMember) Addr() string { return fmt.Sprintf("127.0.0.1:%d", m.Port) }

// Site is the member's site block: seed i+1, its id and counters' name, no
// latency, then the lines given.
func (m SimMember) Site(i int, lines ...string) string {
	return SimSiteAt(m.Port, append([]string{fmt.Sprintf("seed %d", i+1), "server_id " + m.ID, "name " + m.Name, "latency * 0"}, lines...)...)
}

// Trips is how many /status requests reached the member since its counters
// were last reset.
func (m SimMember) Trips() int64 { return sim.Lookup(m.Name).Snapshot().Stations["status"].Requests }

// Status is the member's own /status answer, asked directly, not counted.
func (m SimMember) Status(t *testing.T) []byte {
	t.Helper()
	res, err := http.Get("http://" + m.Addr() + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	sim.Lookup(m.Name).Reset()
	return b
}

// NetworkBlock is the network block of the members, at the addresses
// given (by member; the member's own by default), with self.
func NetworkBlock(ms []SimMember, addrs map[string]string, self string) string {
	var b strings.Builder
	b.WriteString("network main {\n")
	for _, m := range ms {
		addr := m.Addr()
		if a, ok := addrs[m.ID]; ok {
			addr = a
		}
		fmt.Fprintf(&b, "\t\t\tserver %s %s\n", m.ID, addr)
	}
	if self != "" {
		fmt.Fprintf(&b, "\t\t\tself %s\n", self)
	}
	b.WriteString("\t\t}")
	return b.String()
}

// NetworkGateway is the test's gateway: statusgate in front of the first
// member, with the lines given, the network of the members (reached at
// addrs where given), and the members' sites.
func NetworkGateway(ms []SimMember, addrs map[string]string, lines ...string) Gateway {
	var sites []string
	for i, m := range ms {
		sites = append(sites, m.Site(i))
	}
	lines = append([]string{"enable network", NetworkBlock(ms, addrs, ms[0].ID)}, lines...)
	return Gateway{Upstream: ms[0].Addr(), Shared: true, Sites: sites, Statusgate: lines}
}

// NetworkDoc is a network answer as a client reads it.
type NetworkDoc struct {
	OK   bool `json:"ok"`
	Data struct {
		Cluster     string      `json:"cluster"`
		ThisServer  string      `json:"thisServer"`
		ServerCount int         `json:"serverCount"`
		TotalOnline int         `json:"totalOnline"`
		Servers     []Heartbeat `json:"servers"`
	} `json:"data"`
	Meta struct {
		Version       string   `json:"version"`
		Server        *string  `json:"server"`
		UpdatedAt     int64    `json:"updatedAt"`
		CachedAt      *int64   `json:"cachedAt"`
		Unreachable   []string `json:"unreachable"`
		Authenticated bool     `json:"authenticated"`
		HiddenFields  []string `json:"hiddenFields"`
	} `json:"meta"`
}

// Heartbeat is one server of the document, as the plugin's network mode
// writes it.
type Heartbeat struct {
	Server    string   `json:"server"`
	Cluster   string   `json:"cluster"`
	Online    int      `json:"online"`
	Players   []string `json:"players"`
	Discord   *int     `json:"discord"`
	UpdatedAt int64    `json:"updatedAt"`
}

// ReadNetwork reads a network answer: 200, the JSON headers, and a data
// part a client of the plugin's network mode reads (no member it does not
// know, every one it does).
func ReadNetwork(t testing.TB, r Response) NetworkDoc {
	t.Helper()
	var doc NetworkDoc
	if r.Err != nil || r.Status != http.StatusOK {
		t.Fatalf("network: %d %s (err %v), want 200", r.Status, Clip(r.Body), r.Err)
	}
	WantJSONHeaders(t, r, "network")
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatalf("network: %v: %s", err, Clip(r.Body))
	}
	dec := json.NewDecoder(bytes.NewReader(env.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc.Data); err != nil {
		t.Errorf("network: a client of the plugin's shape cannot read the data: %v: %s", err, Clip(env.Data))
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}
