// Package network makes the document a gateway answers /api/v1/network with,
// from what its member game servers answer to /api/v1/status.
//
// The ServerAPI plugin's network mode builds that document from heartbeats
// each server writes to a shared Redis: every server needs Redis, a
// server-id and a cluster-id. A gateway in front of the servers asks each of
// them for /status anyway (through its guard, with a snapshot-aware cache),
// and a status answer carries everything a heartbeat does: who is online,
// how many, the chat platform's member count and when the snapshot was
// taken. So the gateway can give the plugin's document, in the plugin's
// shape, without Redis and without touching the servers' configs.
//
// ParseStatus reads one member's answer, refusing anything that is not a
// well-formed status envelope (an error envelope, the "initializing"
// payload, a body cut short), so that a member that does not answer
// properly is left out of the document rather than shown with made-up
// numbers. A Document is the members that answered, in the order of the
// config, and those that did not; AppendData writes its data part and
// AppendMeta the members of meta it adds.
package network

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/statusgate/statusgate/internal/apijson"
)

// Status is what the network document takes from one member's
// /api/v1/status answer.
type Status struct {
	Online  int64    // data.minecraft: how many players are online
	Players []string // data.online: their UUIDs
	// Discord is data.discord, the chat platform's member count; nil where
	// the member has none (null, or left out).
	Discord *int64
	// At is when the data was taken, in epoch milliseconds: the snapshot's
	// time (meta.cachedAt), or, for a member that gives none, when the
	// answer was made (meta.updatedAt).
	At int64
	// Snapshot says At is a snapshot's time (meta.cachedAt).
	Snapshot bool
}

// ErrNotStatus is the kind of every error of ParseStatus, for errors.Is.
var ErrNotStatus = errors.New("not a status answer")

// notStatus is an error of ParseStatus: why the body is no status answer.
func notStatus(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotStatus, fmt.Sprintf(format, args...))
}

// ParseStatus reads body, a member's /api/v1/status answer: the plugin's
// success envelope {"ok":true,"data":{"online":[…],"minecraft":n,"discord":n|null},
// "meta":{…,"updatedAt":ms,"cachedAt":ms|null}}. Numbers are read as the
// plugin writes them, whole, without a detour through float64. Anything
// else is an error: an error envelope, the "initializing" payload (whose
// data has no online list), a wrong type, or broken JSON.
func ParseStatus(body []byte) (Status, error) {
	var env struct {
		OK   *bool           `json:"ok"`
		Data json.RawMessage `json:"data"`
		Meta json.RawMessage `json:"meta"`
	}
	if !json.Valid(body) {
		return Status{}, notStatus("not valid JSON")
	}
	if err := decode(body, &env); err != nil {
		return Status{}, notStatus("%v", err)
	}
	if env.OK == nil || !*env.OK {
		return Status{}, notStatus("ok is not true")
	}
	var data struct {
		Online    json.RawMessage `json:"online"`
		Minecraft json.RawMessage `json:"minecraft"`
		Discord   json.RawMessage `json:"discord"`
	}
	if err := decode(env.Data, &data); err != nil {
		return Status{}, notStatus("data: %v", err)
	}
	var s Status
	if isNull(data.Online) {
		return Status{}, notStatus("data has no online list (a server still starting answers without one)")
	}
	if err := decode(data.Online, &s.Players); err != nil || s.Players == nil {
		return Status{}, notStatus("data.online is not a list of strings")
	}
	n, ok := whole(data.Minecraft)
	if !ok || n < 0 {
		return Status{}, notStatus("data.minecraft is not a count")
	}
	s.Online = n
	if !isNull(data.Discord) {
		d, ok := whole(data.Discord)
		if !ok || d < 0 {
			return Status{}, notStatus("data.discord is neither a count nor null")
		}
		s.Discord = &d
	}

	var meta struct {
		UpdatedAt json.RawMessage `json:"updatedAt"`
		CachedAt  json.RawMessage `json:"cachedAt"`
	}
	if err := decode(env.Meta, &meta); err != nil {
		return Status{}, notStatus("meta: %v", err)
	}
	if at, ok := whole(meta.CachedAt); ok {
		s.At, s.Snapshot = at, true
	} else if at, ok := whole(meta.UpdatedAt); ok {
		s.At = at
	} else {
		return Status{}, notStatus("meta has neither cachedAt nor updatedAt as a time")
	}
	return s, nil
}

// Skew is how far ahead of the gateway's clock a member's time may be: a
// snapshot taken further in the future is a clock that is off, and a
// document that showed it would be kept until then.
const Skew = 5 * time.Minute

// Epoch is the earliest time a member's time may be, 2020-01-01T00:00:00Z,
// before any server ran the plugin: an earlier one (0, a count of seconds
// read as milliseconds) is no time, and a document that showed it would be
// overdue for ever. A time between Epoch and now is shown as the member
// gives it (updatedAt tells how old its data is): a server whose snapshots
// stopped, or a simulated one that stands still.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Current says why s is no status of the moment now, or nil: its time is
// before Epoch, or more than Skew after now. A member's answer is read
// once (ParseStatus) and may be used again later, so this is asked each
// time.
func (s Status) Current(now time.Time) error {
	at := time.UnixMilli(s.At)
	switch {
	case at.Before(Epoch):
		return notStatus("its time, %d, is before %s: no time of a running server", s.At, Epoch.Format(time.DateOnly))
	case at.After(now.Add(Skew)):
		return notStatus("its time, %s, is more than %s after the gateway's clock", at.UTC().Format(time.RFC3339), Skew)
	}
	return nil
}

// decode reads the JSON value b, a whole valid value (the body was
// validated), into v, numbers as json.Number.
func decode(b []byte, v any) error {
	if isNull(b) {
		return errors.New("missing")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// isNull reports whether a JSON member is absent or null.
func isNull(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// whole reads raw as a JSON integer in int64's range, written as an integer
// (no fraction, no exponent).
func whole(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || !json.Valid([]byte(s)) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Member is one member server in a network document: its id, as the config
// names it, and its status.
type Member struct {
	ID     string
	Status Status
}

// Document is a network's answer: the members that answered, and those
// that did not.
type Document struct {
	Cluster string // the network's name
	// ThisServer is the member that is the gateway's own backend; empty
	// when the gateway is no member's.
	ThisServer string
	// Members are those that answered, in the config's order.
	Members []Member
	// Unreachable are the ids of those that did not, in the config's order.
	Unreachable []string
}

// AppendData appends the document's data part, in the plugin's shape and key
// order: {"cluster":…,"thisServer":…,"serverCount":n,"totalOnline":n,
// "servers":[{"server":…,"cluster":…,"online":n,"players":[…],"discord":n|null,
// "updatedAt":ms},…]}. serverCount and totalOnline count the members listed.
func (d *Document) AppendData(b []byte) []byte {
	total := d.TotalOnline()
	b = append(b, `{"cluster":`...)
	b = apijson.AppendString(b, d.Cluster)
	b = append(b, `,"thisServer":`...)
	b = apijson.AppendString(b, d.ThisServer)
	b = append(b, `,"serverCount":`...)
	b = strconv.AppendInt(b, int64(len(d.Members)), 10)
	b = append(b, `,"totalOnline":`...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, `,"servers":[`...)
	for i, m := range d.Members {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMember(b, d.Cluster, m)
	}
	return append(b, "]}"...)
}

// TotalOnline is the sum of the members' online counts, saturated at the
// largest int64: counts are never negative (ParseStatus), and a sum that
// wrapped would show a small number for an impossible one.
func (d *Document) TotalOnline() int64 {
	var total int64
	for _, m := range d.Members {
		if m.Status.Online > math.MaxInt64-total {
			return math.MaxInt64
		}
		total += m.Status.Online
	}
	return total
}

// Largest is the index of the member whose part of the data is largest
// (its players, most of it), or -1 when none is listed: the one a document
// over its bound leaves out first.
func (d *Document) Largest() int {
	largest, size := -1, -1
	for i, m := range d.Members {
		if n := len(appendMember(nil, d.Cluster, m)); n > size {
			largest, size = i, n
		}
	}
	return largest
}

// appendMember appends m's part of the data of a document of the cluster.
func appendMember(b []byte, cluster string, m Member) []byte {
	s := m.Status
	b = append(b, `{"server":`...)
	b = apijson.AppendString(b, m.ID)
	b = append(b, `,"cluster":`...)
	b = apijson.AppendString(b, cluster)
	b = append(b, `,"online":`...)
	b = strconv.AppendInt(b, s.Online, 10)
	b = append(b, `,"players":`...)
	b = appendStrings(b, s.Players)
	b = append(b, `,"discord":`...)
	if s.Discord == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *s.Discord, 10)
	}
	b = append(b, `,"updatedAt":`...)
	b = strconv.AppendInt(b, s.At, 10)
	return append(b, '}')
}

// AppendMeta appends the members of meta the document adds, each after a
// comma: cachedAt, the earliest snapshot time among the members listed (left
// out when none gives one), which says how old the oldest data is and when
// the next snapshot is due; and unreachable, the ids of the members left
// out ([] when none is).
func (d *Document) AppendMeta(b []byte) []byte {
	if at, ok := d.CachedAt(); ok {
		b = append(b, `,"cachedAt":`...)
		b = strconv.AppendInt(b, at, 10)
	}
	b = append(b, `,"unreachable":`...)
	return appendStrings(b, d.Unreachable)
}

// CachedAt is the earliest snapshot time among the members listed, and
// whether any gives one.
func (d *Document) CachedAt() (int64, bool) {
	var at int64
	found := false
	for _, m := range d.Members {
		if m.Status.Snapshot && (!found || m.Status.At < at) {
			at, found = m.Status.At, true
		}
	}
	return at, found
}

// appendStrings appends ss as a JSON array of strings ([] when empty).
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = apijson.AppendString(b, s)
	}
	return append(b, ']')
}
