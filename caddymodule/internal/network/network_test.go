package network

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	alex  = "40094f2f-ca8f-4826-8b31-11e0f4c449df"
	steve = "8b1e62a0-5c1d-4f0b-9a77-2f3c9d0e6b21"
)

func ptr(n int64) *int64 { return &n }

// TestParseStatus reads the status answers a member may give: the plugin's,
// with and without a snapshot time, null and missing discord, and numbers
// beyond float64's exact range kept whole.
func TestParseStatus(t *testing.T) {
	tests := []struct {
		name, body string
		want       Status
	}{
		{"the plugin's answer",
			`{"ok":true,"data":{"online":["` + alex + `","` + steve + `"],"minecraft":2,"discord":3412},"meta":{"version":"v1","server":"global","updatedAt":1784300001000,"cachedAt":1784300000000,"authenticated":true}}`,
			Status{Online: 2, Players: []string{alex, steve}, Discord: ptr(3412), At: 1784300000000, Snapshot: true}},
		{"nobody online, no chat platform",
			`{"ok":true,"data":{"online":[],"minecraft":0,"discord":null},"meta":{"version":"v1","updatedAt":5,"cachedAt":4}}`,
			Status{Online: 0, Players: []string{}, At: 4, Snapshot: true}},
		{"discord left out, no snapshot time: the answer's time",
			`{"ok":true,"data":{"online":["` + alex + `"],"minecraft":1},"meta":{"version":"v1","updatedAt":7}}`,
			Status{Online: 1, Players: []string{alex}, At: 7}},
		{"cachedAt null: the answer's time",
			`{"ok":true,"data":{"online":[],"minecraft":0,"discord":1},"meta":{"updatedAt":7,"cachedAt":null}}`,
			Status{Players: []string{}, Discord: ptr(1), At: 7}},
		{"meta first, history beside, white space",
			"{ \"meta\" : {\"updatedAt\": 9007199254740993 } ,\n \"ok\": true, \"data\": {\"history\": {\"last\":1,\"online\":[1]}, \"minecraft\": 9007199254740993, \"online\": [\"x\"], \"discord\": 9007199254740995}}",
			Status{Online: 9007199254740993, Players: []string{"x"}, Discord: ptr(9007199254740995), At: 9007199254740993}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatus([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseStatusRefuses: everything that is not a well-formed status
// answer is an error of kind ErrNotStatus that says what is wrong.
func TestParseStatusRefuses(t *testing.T) {
	tests := []struct{ name, body, why string }{
		{"empty", ``, "not valid JSON"},
		{"cut short", `{"ok":true,"data":{"online":[],"minecraft":0`, "not valid JSON"},
		{"two values", `{"ok":true} {}`, "not valid JSON"},
		{"an array", `[1]`, "cannot unmarshal"},
		{"an error envelope", `{"ok":false,"error":{"status":503,"message":"x","path":"/api/v1/status"},"meta":{"version":"v1","updatedAt":1}}`, "ok is not true"},
		{"ok missing", `{"data":{"online":[],"minecraft":0},"meta":{"updatedAt":1}}`, "ok is not true"},
		{"ok a string", `{"ok":"true","data":{"online":[],"minecraft":0},"meta":{"updatedAt":1}}`, "cannot unmarshal"},
		{"initializing", `{"ok":true,"data":{"status":"initializing","message":"Data is not ready yet, please retry shortly"},"meta":{"version":"v1","updatedAt":1,"cachedAt":null}}`, "no online list"},
		{"data null", `{"ok":true,"data":null,"meta":{"updatedAt":1}}`, "data: missing"},
		{"data an array", `{"ok":true,"data":[],"meta":{"updatedAt":1}}`, "data: json: cannot unmarshal"},
		{"online not a list", `{"ok":true,"data":{"online":2,"minecraft":2},"meta":{"updatedAt":1}}`, "data.online is not a list of strings"},
		{"online with a number", `{"ok":true,"data":{"online":["a",1],"minecraft":2},"meta":{"updatedAt":1}}`, "data.online is not a list of strings"},
		{"minecraft missing", `{"ok":true,"data":{"online":[]},"meta":{"updatedAt":1}}`, "data.minecraft is not a count"},
		{"minecraft a fraction", `{"ok":true,"data":{"online":[],"minecraft":1.5},"meta":{"updatedAt":1}}`, "data.minecraft is not a count"},
		{"minecraft an exponent", `{"ok":true,"data":{"online":[],"minecraft":1e2},"meta":{"updatedAt":1}}`, "data.minecraft is not a count"},
		{"minecraft negative", `{"ok":true,"data":{"online":[],"minecraft":-1},"meta":{"updatedAt":1}}`, "data.minecraft is not a count"},
		{"minecraft a string", `{"ok":true,"data":{"online":[],"minecraft":"2"},"meta":{"updatedAt":1}}`, "data.minecraft is not a count"},
		{"minecraft beyond int64", `{"ok":true,"data":{"online":[],"minecraft":9223372036854775808},"meta":{"updatedAt":1}}`, "data.minecraft is not a count"},
		{"discord a string", `{"ok":true,"data":{"online":[],"minecraft":0,"discord":"3"},"meta":{"updatedAt":1}}`, "data.discord is neither a count nor null"},
		{"discord negative", `{"ok":true,"data":{"online":[],"minecraft":0,"discord":-3},"meta":{"updatedAt":1}}`, "data.discord is neither a count nor null"},
		{"no meta", `{"ok":true,"data":{"online":[],"minecraft":0}}`, "meta: missing"},
		{"no time", `{"ok":true,"data":{"online":[],"minecraft":0},"meta":{"version":"v1"}}`, "neither cachedAt nor updatedAt"},
		{"times as strings", `{"ok":true,"data":{"online":[],"minecraft":0},"meta":{"updatedAt":"1","cachedAt":"2"}}`, "neither cachedAt nor updatedAt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStatus([]byte(tc.body))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrNotStatus) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q, want one of kind ErrNotStatus that says %q", err, tc.why)
			}
		})
	}
}

// TestTotalOnlineSaturates: counts at int64's edge sum to its largest value,
// never to a wrapped, small one.
func TestTotalOnlineSaturates(t *testing.T) {
	d := Document{Cluster: "main", Members: []Member{
		{ID: "a", Status: Status{Online: math.MaxInt64, Players: []string{}}},
		{ID: "b", Status: Status{Online: math.MaxInt64, Players: []string{}}},
		{ID: "c", Status: Status{Online: 3, Players: []string{}}},
	}}
	if got := d.TotalOnline(); got != math.MaxInt64 {
		t.Errorf("total %d, want %d", got, int64(math.MaxInt64))
	}
	if data := d.AppendData(nil); !strings.Contains(string(data), `"totalOnline":9223372036854775807,`) {
		t.Errorf("data %s", data)
	}
	d.Members = d.Members[2:]
	if got := d.TotalOnline(); got != 3 {
		t.Errorf("total %d, want 3", got)
	}
}

// TestCurrent: a member's time before Epoch (0, seconds read as
// milliseconds) or more than Skew ahead of the gateway's clock is no status;
// one in between is.
func TestCurrent(t *testing.T) {
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   int64
		want string
	}{
		{0, "is before 2020-01-01"},
		{now.Unix(), "is before 2020-01-01"}, // seconds, not milliseconds
		{now.Add(Skew + time.Second).UnixMilli(), "after the gateway's clock"},
		{now.Add(Skew).UnixMilli(), ""},
		{now.Add(-30 * 24 * time.Hour).UnixMilli(), ""},
		{Epoch.UnixMilli(), ""},
	} {
		err := Status{At: tc.at}.Current(now)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d: %v, want none", tc.at, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrNotStatus) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d: %v, want one that says %q", tc.at, err, tc.want)
		}
	}
}

// TestLargest: the member whose part is largest, the one a document over
// its bound leaves out first.
func TestLargest(t *testing.T) {
	d := Document{Cluster: "main"}
	if d.Largest() != -1 {
		t.Error("no member, yet one is largest")
	}
	d.Members = []Member{
		{ID: "a", Status: Status{Players: []string{"x"}}},
		{ID: "b", Status: Status{Players: []string{"x", "y", "z"}}},
		{ID: "c", Status: Status{Players: []string{"x", "y"}}},
	}
	if got := d.Largest(); got != 1 {
		t.Errorf("largest %d, want 1", got)
	}
}

// TestDocument: the data part has the plugin's shape and key order, counts
// the members listed, and writes each member's status as a heartbeat; meta
// gets the earliest snapshot time and the members left out.
func TestDocument(t *testing.T) {
	d := Document{
		Cluster:    "main",
		ThisServer: "survival",
		Members: []Member{
			{"survival", Status{Online: 2, Players: []string{alex, steve}, Discord: ptr(3412), At: 1784300005000, Snapshot: true}},
			{"lobby", Status{Online: 0, Players: []string{}, At: 1784300009000}},
			{"creative", Status{Online: 1, Players: []string{"\"quoted\"\u2028"}, Discord: ptr(9007199254740993), At: 1784300002000, Snapshot: true}},
		},
		Unreachable: []string{"hardcore"},
	}
	data := string(d.AppendData(nil))
	want := `{"cluster":"main","thisServer":"survival","serverCount":3,"totalOnline":3,"servers":[` +
		`{"server":"survival","cluster":"main","online":2,"players":["` + alex + `","` + steve + `"],"discord":3412,"updatedAt":1784300005000},` +
		`{"server":"lobby","cluster":"main","online":0,"players":[],"discord":null,"updatedAt":1784300009000},` +
		`{"server":"creative","cluster":"main","online":1,"players":["\"quoted\"\u2028"],"discord":9007199254740993,"updatedAt":1784300002000}]}`
	if data != want {
		t.Errorf("data:\n got %s\nwant %s", data, want)
	}
	if !json.Valid([]byte(data)) {
		t.Error("data is not valid JSON")
	}
	if meta := string(d.AppendMeta(nil)); meta != `,"cachedAt":1784300002000,"unreachable":["hardcore"]` {
		t.Errorf("meta: %s", meta)
	}

	empty := Document{Cluster: "main", Unreachable: []string{"a", "b"}}
	if data := string(empty.AppendData(nil)); data != `{"cluster":"main","thisServer":"","serverCount":0,"totalOnline":0,"servers":[]}` {
		t.Errorf("no member answered: data %s", data)
	}
	if meta := string(empty.AppendMeta(nil)); meta != `,"unreachable":["a","b"]` {
		t.Errorf("no member answered: meta %s", meta)
	}
	all := Document{Cluster: "main", Members: d.Members[1:2]}
	if meta := string(all.AppendMeta(nil)); meta != `,"unreachable":[]` {
		t.Errorf("every member answered, none with a snapshot time: meta %s", meta)
	}
}

// TestRoundTrip: a document made from parsed statuses is read back by
// encoding/json as the plugin's shape, numbers whole.
func TestRoundTrip(t *testing.T) {
	s, err := ParseStatus([]byte(`{"ok":true,"data":{"online":["` + alex + `"],"minecraft":1,"discord":null},"meta":{"updatedAt":2,"cachedAt":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := Document{Cluster: "c", ThisServer: "a", Members: []Member{{"a", s}}}
	var got struct {
		Cluster     string `json:"cluster"`
		ThisServer  string `json:"thisServer"`
		ServerCount int    `json:"serverCount"`
		TotalOnline int    `json:"totalOnline"`
		Servers     []struct {
			Server    string   `json:"server"`
			Cluster   string   `json:"cluster"`
			Online    int      `json:"online"`
			Players   []string `json:"players"`
			Discord   *int     `json:"discord"`
			UpdatedAt int64    `json:"updatedAt"`
		} `json:"servers"`
	}
	dec := json.NewDecoder(strings.NewReader(string(d.AppendData(nil))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "c" || got.ThisServer != "a" || got.ServerCount != 1 || got.TotalOnline != 1 || len(got.Servers) != 1 {
		t.Fatalf("%+v", got)
	}
	sv := got.Servers[0]
	if sv.Server != "a" || sv.Cluster != "c" || sv.Online != 1 || !reflect.DeepEqual(sv.Players, []string{alex}) || sv.Discord != nil || sv.UpdatedAt != 1 {
		t.Errorf("%+v", sv)
	}
}
