package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/statusgate/statusgate/internal/fixture"
	"golang.org/x/sys/unix"
)

// The hostile clients: they ask for the largest public answer and then do
// not read it, or read it slowly, to hold whatever the gateway holds for
// them (a backend slot, a buffer, a goroutine) for as long as they like.

// largePlayer is the player whose ?detailed=true is the largest public
// answer the sim serves: Alex_MC, always online (so a backend trip is
// short), the most active player, and with the sim's modded_items about
// 3 MB, more than the kernel's socket buffers on loopback absorb (about
// 2 MB), so that the gateway's own write blocks.
const largePlayer = "40094f2f-ca8f-4826-8b31-11e0f4c449df"

// largePath is the large public answer.
const largePath = "/api/v1/player/" + largePlayer + "?detailed=true"

// retryPause is how long an attacker waits before it asks again after a
// refusal or after the gateway ended its answer: an attacker wants the
// pressure to hold, not to spin on 429s (the abuser class does that).
const retryPause = 100 * time.Millisecond

// attackStats is what one kind of attacker saw in one round.
type attackStats struct {
	mu       sync.Mutex
	status   map[int]int // answers by status; 0: no status line (refused connection, cut before it)
	holding  int         // 200 answers open now: unread (stalled) or being read (slow)
	peakHold int
	requests int   // requests or streams sent
	ended    int   // 200 answers the gateway ended while held: closed, reset, or (slow) complete
	bytes    int64 // body bytes read
	conns    int   // connections opened (HTTP/2)
}

func newAttackStats() *attackStats { return &attackStats{status: map[int]int{}} }

func (a *attackStats) sent() {
	a.mu.Lock()
	a.requests++
	a.mu.Unlock()
}

func (a *attackStats) answer(status int) {
	a.mu.Lock()
	a.status[status]++
	a.mu.Unlock()
}

// hold counts a 200 answer held open (+1) or no longer held (-1), and
// whether the gateway ended it.
func (a *attackStats) hold(delta int, ended bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holding += delta
	a.peakHold = max(a.peakHold, a.holding)
	if ended {
		a.ended++
	}
}

func (a *attackStats) read(n int) {
	a.mu.Lock()
	a.bytes += int64(n)
	a.mu.Unlock()
}

func (a *attackStats) held() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holding
}

// merge adds o's counts to a (peaks: the larger).
func (a *attackStats) merge(o *attackStats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for s, n := range o.status {
		a.status[s] += n
	}
	a.peakHold = max(a.peakHold, o.peakHold)
	a.requests += o.requests
	a.ended += o.ended
	a.bytes += o.bytes
	a.conns += o.conns
}

// attackerIP is the X-Forwarded-For address of attacker i, spread over
// addrs addresses.
func attackerIP(i, addrs int) string {
	return fmt.Sprintf("203.0.113.%d", 100+i%addrs)
}

// h1Readers runs n HTTP/1.1 attackers against addr until ctx ends, each
// on its own connection, re-asking whenever an answer is refused or ended.
// With slowBytes 0 they stall: read the status line and a few bytes, then
// nothing. Otherwise they read slowBytes every slowEvery.
func h1Readers(ctx context.Context, addr string, n, addrs, slowBytes int, slowEvery time.Duration, a *attackStats) {
	var wg sync.WaitGroup
	for i := range n {
		ip := attackerIP(i, addrs)
		wg.Go(func() {
			for ctx.Err() == nil {
				h1Once(ctx, addr, ip, slowBytes, slowEvery, a)
				sleepCtx(ctx, retryPause)
			}
		})
	}
	wg.Wait()
}

// hangUps runs n clients from one address against addr until ctx ends,
// each asking for an answer nobody else asks for (a random player's, or
// with main its placeholders, keyed) and hanging up after after unless an
// answer came first, then asking again at once: what a client that hangs
// up costs the backend (its peak in flight and main-thread tasks).
func hangUps(ctx context.Context, addr string, n int, after time.Duration, main bool, a *attackStats) {
	ip := attackerIP(0, 1)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				hangUpOnce(ctx, addr, ip, after, main, a)
			}
		})
	}
	wg.Wait()
}

// hangUpOnce is one request of a client that hangs up.
func hangUpOnce(ctx context.Context, addr, ip string, after time.Duration, main bool, a *attackStats) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() == nil {
			a.answer(0)
		}
		sleepCtx(ctx, retryPause)
		return
	}
	defer conn.Close()
	uuid := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rand.Uint32(), rand.N(1<<16), rand.N(1<<12), rand.N(1<<12), rand.N(uint64(1)<<48))
	target, key := "/api/v1/player/"+uuid, ""
	if main {
		target, key = "/api/v1/placeholders?uuid="+uuid+"&p=%25player_name%25", "X-API-Key: "+botKey+"\r\n"
	}
	a.sent()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nX-Forwarded-For: %s\r\n%sUser-Agent: flood-hang-up\r\n\r\n", target, addr, ip, key); err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(after))
	if status, err := readStatus(conn); err == nil {
		a.answer(status)
	}
}

// h1Once is one request of a stalled or slow reader.
func h1Once(ctx context.Context, addr, ip string, slowBytes int, slowEvery time.Duration, a *attackStats) {
	d := net.Dialer{Timeout: 2 * time.Second, Control: fixture.SmallRcvBuf}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() == nil {
			a.answer(0)
		}
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	a.sent()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nX-Forwarded-For: %s\r\nUser-Agent: flood-stalled-reader\r\nConnection: close\r\n\r\n",
		largePath, addr, ip); err != nil {
		return
	}
	status, err := readStatus(conn)
	if ctx.Err() != nil {
		return
	}
	a.answer(status)
	if err != nil || status != http.StatusOK {
		return
	}
	ended := false
	a.hold(1, false)
	defer func() { a.hold(-1, ended) }()
	if slowBytes == 0 {
		// Hold on without reading. Only the kernel can say that the gateway
		// gave up on the connection (its FIN or RST), since the unread
		// bytes sit before the end of the stream.
		for sleepCtx(ctx, 250*time.Millisecond) {
			if !established(conn) {
				ended = true
				return
			}
		}
		return
	}
	buf := make([]byte, slowBytes)
	for sleepCtx(ctx, slowEvery) {
		n, err := io.ReadFull(conn, buf)
		a.read(n)
		if err != nil {
			ended = ctx.Err() == nil
			return
		}
	}
}

// readStatus reads the status line in small reads, as a client that wants
// only a few bytes would, and returns its code.
func readStatus(r io.Reader) (int, error) {
	var line []byte
	buf := make([]byte, 32)
	for !bytes.Contains(line, []byte("\r\n")) {
		if len(line) > 256 {
			return 0, errors.New("status line too long")
		}
		n, err := r.Read(buf)
		line = append(line, buf[:n]...)
		if err != nil && !bytes.Contains(line, []byte("\r\n")) {
			return 0, err
		}
	}
	return parseStatusLine(string(line[:bytes.Index(line, []byte("\r\n"))]))
}

// parseStatusLine returns the code of "HTTP/1.1 200 OK".
func parseStatusLine(line string) (int, error) {
	proto, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") || len(rest) < 3 {
		return 0, fmt.Errorf("not a status line: %q", line)
	}
	code, err := strconv.Atoi(rest[:3])
	if err != nil || code < 100 || code > 999 {
		return 0, fmt.Errorf("not a status line: %q", line)
	}
	return code, nil
}

// tcpEstablished is TCP_ESTABLISHED in tcp_info's state.
const tcpEstablished = 1

// established reports whether the kernel still has conn established: a FIN
// from the peer moves it to CLOSE_WAIT, an RST closes it.
func established(conn net.Conn) bool {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	state := -1
	_ = rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = int(info.State)
		}
	})
	return state == tcpEstablished
}

// sleepCtx sleeps for d and reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// h2Streams runs HTTP/2 attackers until ctx ends: streams streams, all for
// the large answer, over at least conns h2c connections (more when the
// server allows fewer streams per connection than that takes), none of them
// ever read: the client announces a window of window bytes per stream and
// never sends a WINDOW_UPDATE, for the streams or for the connection. A
// stream the gateway ends or resets is opened anew.
func h2Streams(ctx context.Context, addr string, streams, conns, addrs int, window uint32, a *attackStats) {
	var wg sync.WaitGroup
	remaining := streams
	for i := 0; remaining > 0 && ctx.Err() == nil; i++ {
		hc, err := dialH2(ctx, addr, window)
		if err != nil {
			a.answer(0)
			sleepCtx(ctx, retryPause)
			continue
		}
		per := (remaining + max(1, conns-i) - 1) / max(1, conns-i)
		n := min(per, int(hc.maxStreams))
		remaining -= n
		a.mu.Lock()
		a.conns++
		a.mu.Unlock()
		first := streams - remaining - n
		wg.Go(func() { hc.run(ctx, addr, window, first, n, addrs, a) })
	}
	wg.Wait()
}

// h2conn is one attacking HTTP/2 connection, driven frame by frame.
type h2conn struct {
	conn       net.Conn
	fr         *http2.Framer
	maxStreams uint32

	wmu    sync.Mutex // the framer's writes and the encoder
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	nextID uint32
	ips    map[uint32]string // open stream: its X-Forwarded-For
	held   map[uint32]bool   // open streams with a 200
}

// dialH2 opens an h2c connection by prior knowledge: the client preface,
// SETTINGS with the small window, and the server's SETTINGS read and
// acknowledged.
func dialH2(ctx context.Context, addr string, window uint32) (*h2conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	hc := &h2conn{conn: conn, nextID: 1, maxStreams: 100, ips: map[uint32]string{}, held: map[uint32]bool{}}
	hc.fr = http2.NewFramer(conn, bufio.NewReaderSize(conn, 32<<10))
	hc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	hc.enc = hpack.NewEncoder(&hc.encBuf)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, err
	}
	if err := hc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window}, http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		conn.Close()
		return nil, err
	}
	for {
		f, err := hc.fr.ReadFrame()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("h2c handshake: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
				hc.maxStreams = v
			}
			if err := hc.fr.WriteSettingsAck(); err != nil {
				conn.Close()
				return nil, err
			}
			break
		}
	}
	_ = conn.SetDeadline(time.Time{})
	return hc, nil
}

// open sends the HEADERS of one more stream for the large answer.
func (hc *h2conn) open(authority, ip string, a *attackStats) error {
	hc.wmu.Lock()
	defer hc.wmu.Unlock()
	hc.encBuf.Reset()
	for _, f := range [][2]string{
		{":method", "GET"}, {":scheme", "http"}, {":authority", authority}, {":path", largePath},
		{"x-forwarded-for", ip}, {"user-agent", "flood-stalled-stream"},
	} {
		_ = hc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	id := hc.nextID
	hc.nextID += 2
	hc.ips[id] = ip
	a.sent()
	return hc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hc.encBuf.Bytes(), EndStream: true, EndHeaders: true})
}

// run opens n streams and answers the server's control frames (SETTINGS
// and PING, as any client must), never a WINDOW_UPDATE. When the
// connection ends it dials again, until ctx ends.
func (hc *h2conn) run(ctx context.Context, addr string, window uint32, first, n, addrs int, a *attackStats) {
	for {
		hc.serve(ctx, addr, first, n, addrs, a)
		for {
			if !sleepCtx(ctx, retryPause) {
				return
			}
			next, err := dialH2(ctx, addr, window)
			if err == nil {
				hc = next
				break
			}
			a.answer(0)
		}
		a.mu.Lock()
		a.conns++
		a.mu.Unlock()
	}
}

func (hc *h2conn) serve(ctx context.Context, addr string, first, n, addrs int, a *attackStats) {
	stop := context.AfterFunc(ctx, func() { hc.conn.Close() })
	defer stop()
	defer hc.conn.Close()
	for i := range n {
		if hc.open(addr, attackerIP(first+i, addrs), a) != nil {
			return
		}
	}
	// done forgets a stream the gateway ended and, after the pause, opens
	// another from the same address.
	done := func(id uint32, ended bool) {
		ip, ok := hc.ips[id]
		if !ok {
			return
		}
		delete(hc.ips, id)
		if hc.held[id] {
			delete(hc.held, id)
			a.hold(-1, ended)
		}
		time.AfterFunc(retryPause, func() {
			if ctx.Err() == nil {
				_ = hc.open(addr, ip, a)
			}
		})
	}
	defer func() {
		hc.wmu.Lock()
		defer hc.wmu.Unlock()
		for range hc.held {
			a.hold(-1, ctx.Err() == nil)
		}
		clear(hc.held)
		clear(hc.ips)
	}()
	for {
		f, err := hc.fr.ReadFrame()
		if err != nil {
			return
		}
		hc.wmu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = hc.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = hc.fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			id := f.StreamID
			if _, open := hc.ips[id]; open && !hc.held[id] {
				status, _ := strconv.Atoi(f.PseudoValue("status"))
				if ctx.Err() == nil {
					a.answer(status)
				}
				if status == http.StatusOK && !f.StreamEnded() {
					hc.held[id] = true
					a.hold(1, false)
				}
			}
			if f.StreamEnded() {
				done(id, true)
			}
		case *http2.DataFrame:
			a.read(len(f.Data()))
			if f.StreamEnded() {
				done(f.StreamID, true)
			}
		case *http2.RSTStreamFrame:
			done(f.StreamID, true)
		case *http2.GoAwayFrame:
			err = errors.New("goaway")
		}
		hc.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// rssBytes is this process's resident set size, from /proc/self/status.
func rssBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return parseVmRSS(string(b))
}

// settledRSS is the resident set size after a collection that returns
// the freed memory to the system, so that garbage does not count.
func settledRSS() (int64, error) {
	debug.FreeOSMemory()
	return rssBytes()
}

// parseVmRSS reads the VmRSS line of /proc/<pid>/status ("VmRSS:  1234 kB").
func parseVmRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line in /proc/self/status")
}

// blockedSends counts the established IPv4 sockets on local port port
// whose send queue holds bytes the peer has not acknowledged: the
// gateway's side of a connection whose reader does not read. It reads
// /proc/net/tcp.
func blockedSends(port int) (int, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	return parseBlockedSends(string(b), port)
}

// parseBlockedSends is blockedSends on the text of /proc/net/tcp: "sl
// local_address rem_address st tx_queue:rx_queue ...", addresses and
// queues in hex, state 01 for established.
func parseBlockedSends(table string, port int) (int, error) {
	n := 0
	for i, line := range slices.Collect(strings.Lines(table)) {
		f := strings.Fields(line)
		if i == 0 || len(f) < 5 {
			continue
		}
		_, lport, ok := strings.Cut(f[1], ":")
		if !ok {
			return 0, fmt.Errorf("/proc/net/tcp line %d: %q", i+1, line)
		}
		p, err1 := strconv.ParseUint(lport, 16, 16)
		tx, _, _ := strings.Cut(f[4], ":")
		q, err2 := strconv.ParseUint(tx, 16, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("/proc/net/tcp line %d: %q", i+1, line)
		}
		if int(p) == port && f[3] == "01" && q > 0 {
			n++
		}
	}
	return n, nil
}

// probe is the identical-requests check: while attackers hold the large
// answer, a well-behaved client asks for it four times at once.
type probe struct {
	trip      time.Duration   // one request for it before the attack: the backend trip it costs
	tripBytes int             // that answer's size, as the gateway sent it
	latencies []time.Duration // the four, in order of completion
	statuses  []int
}

// probeCount is how many identical requests the probe sends.
const probeCount = 4

// fetchLarge asks for the large answer as a normal client, reads it whole
// and returns its status, size and time.
func fetchLarge(ctx context.Context, client *http.Client, base, ip string) (int, int, time.Duration) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+largePath, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("X-Forwarded-For", ip)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, time.Since(start)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, int(n), time.Since(start)
	}
	return resp.StatusCode, int(n), time.Since(start)
}

// runProbe sends the probe's identical requests at once from one address.
func runProbe(ctx context.Context, client *http.Client, base string, p *probe) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range probeCount {
		wg.Go(func() {
			status, _, d := fetchLarge(ctx, client, base, "198.51.100.7")
			mu.Lock()
			p.latencies = append(p.latencies, d)
			p.statuses = append(p.statuses, status)
			mu.Unlock()
		})
	}
	wg.Wait()
}
