package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// target is one gateway under load: its base URL and a client whose keep-alive
// connections persist across that gateway's rounds.
type target struct {
	name   string
	base   string // http://127.0.0.1:port
	client *http.Client
	pid    int // the Caddy process, for its CPU time; 0 if unknown
}

func newTarget(name, base string, workers int) *target {
	tr := &http.Transport{
		MaxIdleConns:        workers * 2,
		MaxIdleConnsPerHost: workers * 2,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true, // no Accept-Encoding: gzip; the bytes are compared
	}
	return &target{name: name, base: base, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// request is what a scenario sends, and what every response must look like.
type request struct {
	path    string
	key     string // X-API-Key, empty for anonymous
	wantLen int64  // the verified sample's length; every response must match it
}

func (t *target) newRequest(ctx context.Context, rq request) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+rq.path, nil)
	if err != nil {
		return nil, err
	}
	if rq.key != "" {
		req.Header.Set("X-API-Key", rq.key)
	}
	return req, nil
}

// fetch returns one whole response body and its status.
func (t *target) fetch(ctx context.Context, rq request) (int, []byte, error) {
	req, err := t.newRequest(ctx, rq)
	if err != nil {
		return 0, nil, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// roundResult is one fixed-duration round against one target.
type roundResult struct {
	requests  int
	elapsed   time.Duration
	latencies []time.Duration // of every counted request
	late      int             // requests that completed after the round's end
	cpu       time.Duration   // CPU time of the target process during the round
	failures  int             // wrong status or length, transport errors
	firstFail string
}

func (r roundResult) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// cpuPerRequest is the target process's CPU time per request served, counting
// the requests still in flight at the round's end, whose CPU time is in cpu.
func (r roundResult) cpuPerRequest() time.Duration {
	if r.cpu == 0 || r.requests+r.late == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.requests+r.late)
}

// runRound drives t with workers concurrent keep-alive clients for d. Only
// requests that complete within d count. Every response must be 200 with the
// sample's length; anything else is a failure.
func runRound(t *target, rq request, workers int, d time.Duration) roundResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cpu0 := processCPU(t.pid)
	start := time.Now()
	deadline := start.Add(d)
	results := make([]roundResult, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			res := &results[w]
			res.latencies = make([]time.Duration, 0, 4096)
			req, err := t.newRequest(ctx, rq)
			if err != nil {
				res.fail(err.Error())
				return
			}
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				status, n, err := t.do(req)
				t1 := time.Now()
				if t1.After(deadline) {
					res.late++
					return
				}
				switch {
				case err != nil:
					res.fail(err.Error())
				case status != http.StatusOK:
					res.fail(fmt.Sprintf("status %d", status))
				case n != rq.wantLen:
					res.fail(fmt.Sprintf("body of %d bytes, the sample had %d", n, rq.wantLen))
				default:
					res.requests++
					res.latencies = append(res.latencies, t1.Sub(t0))
				}
			}
		})
	}
	wg.Wait()
	total := roundResult{elapsed: d}
	if cpu1 := processCPU(t.pid); cpu0 > 0 && cpu1 > cpu0 {
		total.cpu = cpu1 - cpu0
	}
	for _, r := range results {
		total.requests += r.requests
		total.late += r.late
		total.latencies = append(total.latencies, r.latencies...)
		total.failures += r.failures
		if total.firstFail == "" {
			total.firstFail = r.firstFail
		}
	}
	slices.Sort(total.latencies)
	return total
}

func (r *roundResult) fail(msg string) {
	r.failures++
	if r.firstFail == "" {
		r.firstFail = msg
	}
}

// do sends req and reads the body to its end, returning its length.
func (t *target) do(req *http.Request) (int, int64, error) {
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, n, err
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100
// on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// processCPU is the user plus system CPU time of a process and all its
// threads so far, from /proc/<pid>/stat; 0 when it cannot be read.
func processCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces; the fields after it start with state (field 3).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * clockTick
}
