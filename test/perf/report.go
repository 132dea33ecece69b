package main

import (
	"fmt"
	"strings"
	"time"
)

func mib(kb int64) float64 { return float64(kb) / 1024 }

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

func passMiss(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix)
}

// printMarkdown prints the results as Markdown tables for docs/performance.md.
func printMarkdown(c config, machine string, results []*result, probes [2]probeResult) {
	fmt.Println("== Markdown")
	fmt.Printf("Measured with `%s` on %s: %d keep-alive workers, %d interleaved round(s) of %s per gateway; the load generator and the backend share the CPU with Caddy.\n\n",
		command(), machine, c.workers, c.rounds, c.duration)
	fmt.Println("| # | scenario | response | plain req/s | statusgate req/s | statusgate/plain | plain p50 / p99 | statusgate p50 / p99 | Caddy CPU/req plain / statusgate | target |")
	fmt.Println("|---|---|---:|---:|---:|---:|---|---|---|---|")
	for _, r := range results {
		p, s := summarize(r.plain), summarize(r.sg)
		target := "–"
		if r.target > 0 {
			target = fmt.Sprintf("≥ %.2f %s", r.target, passMiss(r.ratio >= r.target))
		}
		fmt.Printf("| %d | %s | %s | %.0f | %.0f | %.3f | %s / %s | %s / %s | %s / %s | %s |\n",
			r.sc.num, r.sc.name, size(r.reqs[1].wantLen), p.rps, s.rps, r.ratio, ms(p.p50), ms(p.p99), ms(s.p50), ms(s.p99), us(p.cpu), us(s.cpu), target)
	}
	if c.noProbe {
		return
	}
	growth := mib(probes[1].growthKB())
	fmt.Println()
	fmt.Printf("| %s anonymous /player body, fresh process | plain | statusgate | target |\n", size(c.bulk))
	fmt.Println("|---|---:|---:|---|")
	fmt.Printf("| peak RSS growth (VmHWM after − before) | %.1f MiB | %.1f MiB | ≤ %d MiB %s |\n",
		mib(probes[0].growthKB()), growth, targetProbeGrowthMiB, passMiss(growth <= targetProbeGrowthMiB))
	fmt.Printf("| protected members in the response | %d | %d | 0 |\n", probes[0].scan.leaked(), probes[1].scan.leaked())
}

// size formats a byte count.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
