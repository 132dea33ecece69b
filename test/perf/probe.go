package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
)

// probeResult is one gateway's memory probe: a fresh Caddy process, one large
// filtered-path body streamed through it.
type probeResult struct {
	gateway       string
	hwmBefore     int64 // VmHWM in kB after warm-up
	hwmAfter      int64 // VmHWM in kB after the large body
	rssAfter      int64 // VmRSS in kB after the large body
	status        int
	scan          keyScan
	allocsProfile string // alloc profile taken after the body, statusgate only
	scanErr       error
}

func (p probeResult) growthKB() int64 { return p.hwmAfter - p.hwmBefore }

// memoryProbe starts a fresh gateway, warms it up with the scenario requests
// (anonymous), records VmHWM, streams one bulk body of size bytes through it
// anonymously into the key scanner, and records VmHWM again.
func memoryProbe(ctx context.Context, bin, dir, name, backendAddr, key string, size int64, warm []request) (probeResult, error) {
	res := probeResult{gateway: name}
	g, err := startGateway(ctx, bin, dir, name+"-probe", backendAddr, key)
	if err != nil {
		return res, err
	}
	defer g.Stop()
	t := newTarget(name, g.Base(), 1)
	for _, rq := range warm {
		if _, _, err := t.fetch(ctx, rq); err != nil {
			return res, fmt.Errorf("warm-up %s: %v", rq.path, err)
		}
	}
	pid := g.Pid()
	if res.hwmBefore, err = vmKB(pid, "VmHWM"); err != nil {
		return res, err
	}
	path := bulkPath(size)
	req, err := t.newRequest(ctx, request{path: path})
	if err != nil {
		return res, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return res, err
	}
	res.status = resp.StatusCode
	res.scan, res.scanErr = scanKeys(resp.Body, protectedNames)
	resp.Body.Close()
	if res.hwmAfter, err = vmKB(pid, "VmHWM"); err != nil {
		return res, err
	}
	if res.rssAfter, err = vmKB(pid, "VmRSS"); err != nil {
		return res, err
	}
	if key != "" {
		prof := filepath.Join(dir, name+"-probe.allocs.pb.gz")
		if err := g.adminGet("/debug/pprof/allocs", prof); err == nil {
			res.allocsProfile = prof
		}
	}
	return res, nil
}

// checkProbes checks the correctness of the two probes: the plain gateway
// passes the body whole with every protected member in it (which also shows
// the scanner sees them), statusgate passes every other member and none of
// the protected ones, and says so in meta.
func checkProbes(plain, sg probeResult, size int64) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	for _, p := range []probeResult{plain, sg} {
		if p.status != http.StatusOK {
			add("%s: 64 MB probe answered %d", p.gateway, p.status)
		}
		if p.scanErr != nil {
			add("%s: 64 MB probe body broken after %d bytes: %v", p.gateway, p.scan.Bytes, p.scanErr)
		}
	}
	if len(bad) > 0 {
		return bad
	}
	if plain.scan.Bytes != size {
		add("plain: 64 MB probe body is %d bytes, the backend sent %d", plain.scan.Bytes, size)
	}
	if plain.scan.leaked() == 0 {
		add("plain: the scanner found no protected member in the unfiltered probe body")
	}
	if n := sg.scan.leaked(); n > 0 {
		add("statusgate: %d protected members leaked in the 64 MB probe body: %v", n, sg.scan.Protected)
	}
	if want := plain.scan.DataKeys - plain.scan.leaked(); sg.scan.DataKeys != want {
		add("statusgate: 64 MB probe body has %d members outside meta, want %d", sg.scan.DataKeys, want)
	}
	meta, err := decodeJSON(sg.scan.Meta)
	m, _ := meta.(map[string]any)
	switch {
	case err != nil || m == nil:
		add("statusgate: 64 MB probe body has no usable top-level meta (%v): %.200s", err, sg.scan.Meta)
	case m["authenticated"] != false:
		add("statusgate: 64 MB probe meta.authenticated is %v, want false", m["authenticated"])
	case fmt.Sprint(m["hiddenFields"]) != fmt.Sprint(protectedNames):
		add("statusgate: 64 MB probe meta.hiddenFields is %v, want %v", m["hiddenFields"], protectedNames)
	}
	return bad
}
