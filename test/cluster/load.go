package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// client is the test's load balancer and its clients in one: many
// connections to each gateway, each request with the client address the
// balancer would put in X-Forwarded-For.
var client = &http.Client{
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
	Timeout:   15 * time.Second,
}

// result is one request's fate.
type result struct {
	at      time.Duration // when it was sent, from the start of the load
	done    time.Duration // when it was answered
	gateway string
	status  int // 0: no answer (err)
	err     error
}

// get sends GET path to base as the client at addr, with header h.
func get(ctx context.Context, base, path, addr string, h http.Header) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("X-Forwarded-For", addr)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// flood runs workers callers for d, each sending its next request as soon
// as the last is answered, to the gateways in turn; request gives each
// caller's path, address and header. Requests under way at the end are
// waited for, not cut off: a client that left would leave its request at
// the backend (the plugin finishes what it started) and the gateway's slot
// free, and the next load would find the backend fuller than its gateways
// admit.
func flood(ctx context.Context, gws []*gateway, workers int, d time.Duration, request func(worker int) (path, addr string, h http.Header)) []result {
	start := time.Now()
	var mu sync.Mutex
	var all []result
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; time.Since(start) < d && ctx.Err() == nil; i++ {
				g := gws[i%len(gws)]
				path, addr, h := request(w)
				at := time.Since(start)
				status, err := get(ctx, g.base(), path, addr, h)
				mu.Lock()
				all = append(all, result{at: at, done: time.Since(start), gateway: g.name, status: status, err: err})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all
}

// paced sends rate requests a second for d, each to the gateway pick
// chooses for it (nil: none is up, skip it), without waiting for answers,
// as many clients behind one address would.
func paced(ctx context.Context, rate int, d time.Duration, pick func(seq int) *gateway, path, addr string, h http.Header) []result {
	start := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var mu sync.Mutex
	var all []result
	var wg sync.WaitGroup
	for seq := 0; time.Since(start) < d; seq++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return all
		case <-tick.C:
		}
		g := pick(seq)
		if g == nil {
			continue
		}
		at := time.Since(start)
		wg.Go(func() {
			status, err := get(ctx, g.base(), path, addr, h)
			mu.Lock()
			all = append(all, result{at: at, done: time.Since(start), gateway: g.name, status: status, err: err})
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i].done < all[j].done })
	return all
}

// window is one of a zone's windows under a paced load: how many requests
// it let through, and whether the clients kept their pace in it.
type window struct {
	passed int
	// paced: the clients sent at least 90% of the window's requests on
	// time, and every answer in it came within a second. On a machine too
	// busy for that (a stalled client or gateway process), the window
	// measures the machine, not the limiter, and only its upper bound
	// means anything.
	paced bool
}

// windows cuts a paced load of rate requests a second into the zone's
// windows, from the first request let through (200), which is where the
// limiter's own window starts: caddy-ratelimit's is a sliding log, which
// under a steady flood lets a burst through, then one for each that
// leaves the window, so its bursts repeat every window from there. A
// request counts when it was answered: the limiter decides after the
// gateway's admission, a millisecond or so before the answer of a trip to
// /status, which may be long after it was sent if it queued. rs are in the
// order they were answered (paced). Only whole windows before end count.
func windows(rs []result, rate int, end time.Duration) []window {
	var first time.Duration = -1
	for _, r := range rs {
		if r.status == http.StatusOK {
			first = r.done
			break
		}
	}
	if first < 0 {
		return nil
	}
	n := int((end - first) / zoneWindow)
	ws := make([]window, n)
	sent := make([]int, n)
	slow := make([]bool, n)
	for _, r := range rs {
		if i := int((r.at - first) / zoneWindow); r.at >= first && i < n {
			sent[i]++
		}
		i := int((r.done - first) / zoneWindow)
		if i >= n {
			continue
		}
		if r.status == http.StatusOK {
			ws[i].passed++
		}
		if r.done-r.at > time.Second {
			slow[i] = true
		}
	}
	for i := range ws {
		ws[i].paced = !slow[i] && sent[i] >= rate*int(zoneWindow/time.Second)*9/10
	}
	return ws
}

// counts are the windows' counts, a window the clients could not pace
// marked with a star.
func counts(ws []window) string {
	var s []string
	for _, w := range ws {
		c := strconv.Itoa(w.passed)
		if !w.paced {
			c += "*"
		}
		s = append(s, c)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// tally counts statuses (and errors, as 0) by gateway.
func tally(rs []result) map[string]map[int]int {
	t := map[string]map[int]int{}
	for _, r := range rs {
		if t[r.gateway] == nil {
			t[r.gateway] = map[int]int{}
		}
		t[r.gateway][r.status]++
	}
	return t
}

// firstErrors describes up to n requests that got no answer.
func firstErrors(rs []result, n int) string {
	var out []string
	for _, r := range rs {
		if r.err != nil && len(out) < n {
			out = append(out, fmt.Sprintf("%s at %v: %v", r.gateway, r.at.Round(time.Millisecond), r.err))
		}
	}
	return strings.Join(out, "; ")
}

// perSecond is the requests let through in each second of the load, by
// gateway, from the first let through: what a window's count is made of,
// for the log of a failed check.
func perSecond(rs []result) string {
	var first time.Duration = -1
	counts := map[string][]int{}
	for _, r := range rs {
		if r.status != http.StatusOK {
			continue
		}
		if first < 0 {
			first = r.done
		}
		i := int((r.done - first) / time.Second)
		for len(counts[r.gateway]) <= i {
			counts[r.gateway] = append(counts[r.gateway], 0)
		}
		counts[r.gateway][i]++
	}
	var out []string
	for _, g := range []string{"a", "b"} {
		out = append(out, fmt.Sprintf("%s %v", g, counts[g]))
	}
	return strings.Join(out, "; ")
}
