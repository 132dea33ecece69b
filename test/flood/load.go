package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// The classes of callers, in report order. The pollers' requests are split
// by endpoint, because the targets differ.
const (
	classStatus       = "anon /status"
	classPlayer       = "anon /player"
	classAbuser       = "abuser /player"
	classPlaceholders = "keyed /placeholders"
	classBot          = "keyed bot /server"
)

var classes = []string{classStatus, classPlayer, classAbuser, classPlaceholders, classBot}

// anonymous reports whether a class calls without a key: its bodies are
// checked for protected fields and keyed bytes.
func anonymous(class string) bool {
	return class == classStatus || class == classPlayer || class == classAbuser
}

// protectedNames are the protected fields of an anonymous class's endpoint
// in statusgate's defaults: none on /status (its "discord" is a public
// member count), op, banned, chatplatform and discord on /player.
func protectedNames(class string) []string {
	if class == classStatus {
		return nil
	}
	return []string{"op", "banned", "chatplatform", "discord"}
}

// players the pollers ask about: the sim's named players, some always
// online (Alex_MC), some never (Griefer42, OldTimer), the rest coming and
// going, so that some requests take the slow offline path.
var players = []string{
	"40094f2f-ca8f-4826-8b31-11e0f4c449df", // Alex_MC, always online
	"8b1e62a0-5c1d-4f0b-9a77-2f3c9d0e6b21", // Griefer42, never online
	"1c9e0a44-7b0d-4a9e-8f21-3e5d6c7b8a90",
	"5e7c3b2a-9d41-4f6e-b8a0-6c2d1e9f7a35",
	"c3a1f0d2-7e6b-4a59-9c8d-0b1a2e3f4d56",
	"9f8e7d6c-5b4a-4392-8170-6a5b4c3d2e1f",
	"2b3c4d5e-6f70-4812-9a3b-4c5d6e7f8091",
	"7a6b5c4d-3e2f-4109-8877-665544332211", // OldTimer, never online
}

// tally is what one class of callers saw in one round.
type tally struct {
	mu        sync.Mutex
	latencies []time.Duration // every answered or failed request
	status    map[int]int     // by HTTP status; 0 for a transport error or timeout
	leaks     int             // anonymous bodies with a protected field
	keyed     int             // anonymous bodies that say meta.authenticated true
	bad       int             // anonymous 200 bodies that are not a JSON object with one meta
}

func newTally() *tally { return &tally{status: map[int]int{}} }

func (t *tally) add(status int, d time.Duration, leak, keyed, bad bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.latencies = append(t.latencies, d)
	t.status[status]++
	if leak {
		t.leaks++
	}
	if keyed {
		t.keyed++
	}
	if bad {
		t.bad++
	}
}

// total is the number of requests counted.
func (t *tally) total() int { return len(t.latencies) }

// ok is the number of 2xx answers.
func (t *tally) ok() int {
	n := 0
	for s, c := range t.status {
		if s >= 200 && s < 300 {
			n += c
		}
	}
	return n
}

// caller sends one class's requests and counts the answers.
type caller struct {
	client *http.Client
	base   string
	class  string
	ip     string    // X-Forwarded-For: who Caddy takes the caller for
	key    string    // X-API-Key, or none
	from   time.Time // requests that start before it are not counted (the warm-up)
	tally  *tally
}

// do sends one GET of path. A request cut short because the round ended
// is not counted: it says nothing about the gateway; nor is one that
// started during the warm-up.
func (c *caller) do(ctx context.Context, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("X-Forwarded-For", c.ip)
	if c.key != "" {
		req.Header.Set("X-API-Key", c.key)
	}
	start := time.Now()
	resp, err := c.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	d := time.Since(start)
	if ctx.Err() != nil || start.Before(c.from) {
		return
	}
	if err != nil {
		c.tally.add(0, d, false, false, false)
		return
	}
	var leak, keyed, bad bool
	if anonymous(c.class) {
		leak, keyed, bad = checkAnonymous(resp.StatusCode, body, protectedNames(c.class))
	}
	c.tally.add(resp.StatusCode, d, leak, keyed, bad)
}

// checkAnonymous looks at one body sent to a caller without a key: does it
// carry a protected field anywhere outside meta, or the backend's
// meta.authenticated true (bytes meant for a keyed caller)? A 200 that is
// not an envelope counts as bad; other statuses may have any body (plain
// reverse_proxy's errors are empty), but a JSON one is checked all the same.
func checkAnonymous(status int, body []byte, names []string) (leak, keyed, bad bool) {
	tree, err := fixture.DecodeTree(body)
	if err != nil {
		return false, false, status == http.StatusOK
	}
	_, hidden, ok := fixture.Filtered(tree, names, false)
	if !ok {
		return false, false, status == http.StatusOK
	}
	for _, m := range tree.Obj {
		if m.Key != "meta" {
			continue
		}
		for _, mm := range m.Val.Obj {
			if mm.Key == "authenticated" && mm.Val.Scalar == true {
				keyed = true
			}
		}
	}
	return len(hidden) > 0, keyed, false
}

// every calls fn every interval until ctx ends, starting at a random
// offset so that the callers do not march in step.
func every(ctx context.Context, interval time.Duration, fn func()) {
	timer := time.NewTimer(rand.N(interval) + 1)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		fn()
		timer.Reset(interval)
	}
}

// flood runs every class of callers against base until ctx ends and
// returns their tallies of the requests that started at from or later.
func flood(ctx context.Context, c config, base string, from time.Time) map[string]*tally {
	tallies := map[string]*tally{}
	for _, cl := range classes {
		tallies[cl] = newTally()
	}
	tr := &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: c.clientTimeout}
	var wg sync.WaitGroup
	start := func(class, ip, key string, loop func(*caller)) {
		cl := &caller{client: client, base: base, class: class, ip: ip, key: key, from: from, tally: tallies[class]}
		wg.Go(func() { loop(cl) })
	}

	// Pollers: a website widget each, from its own address, alternating
	// /status and a player.
	for i := range c.pollers {
		player := tallies[classPlayer]
		ip := fmt.Sprintf("198.18.%d.%d", i/250, i%250+1)
		start(classStatus, ip, "", func(cl *caller) {
			pl := *cl
			pl.class, pl.tally = classPlayer, player
			n := 0
			every(ctx, c.pollInterval, func() {
				if n%2 == 0 {
					cl.do(ctx, "/api/v1/status")
				} else {
					pl.do(ctx, "/api/v1/player/"+players[rand.IntN(len(players))])
				}
				n++
			})
		})
	}
	// The abuser: one address, as many connections as it likes, a new
	// random player each time so that nothing can be served twice.
	for range c.abuserConns {
		start(classAbuser, "203.0.113.66", "", func(cl *caller) {
			for ctx.Err() == nil {
				cl.do(ctx, "/api/v1/player/"+randomUUID())
			}
		})
	}
	// The operator's keyed callers.
	for i := range c.placeholderCallers {
		start(classPlaceholders, fmt.Sprintf("192.0.2.%d", i+10), botKey, func(cl *caller) {
			every(ctx, c.placeholderInterval, func() {
				cl.do(ctx, "/api/v1/placeholders?uuid="+players[0]+"&p=player_name,vault_eco_balance")
			})
		})
	}
	start(classBot, "192.0.2.1", botKey, func(cl *caller) {
		every(ctx, c.botInterval, func() { cl.do(ctx, "/api/v1/server") })
	})
	wg.Wait()
	for _, t := range tallies {
		slices.Sort(t.latencies)
	}
	return tallies
}

func randomUUID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
