package reload

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestReloadInvisibleToKeptKeys: 4 clients of a key every config keeps
// send requests on kept-alive connections (HTTP/1.1, and HTTP/2 without
// TLS) through 20 reloads, each of which removes another key, with and
// without shutdown_delay (every reload then drops a listener, so Caddy
// keeps the old server serving for the delay): none of their requests
// fails, whichever config its connection reached (a new connection that
// Caddy's listener handover resets unanswered is counted apart: no handler
// sees it). A connection of the old
// server, sent the kept key and the removed one once the old config knows
// it is replaced (during the delay), gets a 200 and the new config's 404;
// and the removed key is refused from the first request after /load
// returns. Before, the old config answered every request of its
// connections with 503 from the moment its successor took over until its
// server closed them: for the whole delay.
func TestReloadInvisibleToKeptKeys(t *testing.T) {
	ports, err := harness.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		h2    bool
		delay bool
	}{
		{"HTTP/1.1", false, false},
		{"HTTP/2", true, false},
		{"HTTP/1.1 shutdown_delay", false, true},
		{"HTTP/2 shutdown_delay", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := NewBackend(t)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
			if c.h2 {
				client = H2C()
			}
			defer client.CloseIdleConnections()
			keys := []string{KeyB, KeyC} // the one each config has beside KeyA
			config := func(i int) string {
				g := Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "key " + keys[i%2]},
					Global: []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\tprotocols h1 h2c\n\t}"}}
				if c.delay {
					// Caddy applies shutdown_delay only when a listener
					// closes: each config listens on one more port, which
					// the next drops.
					g.Global = append(g.Global, "shutdown_delay 500ms")
					// It says whether its server is shutting down: the
					// old config knows it is replaced by then.
					g.Sites = []string{fmt.Sprintf("http://:%d {\n\trespond \"{http.shutting_down}\"\n}", ports[i%2])}
				}
				return g.Caddyfile()
			}
			const server = "/api/v1/server"
			want := BackendBody(server)
			// pinned is one connection, made before each reload: the old
			// server's, while it serves.
			pinned := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			if c.h2 {
				pinned = H2C()
			}
			defer pinned.CloseIdleConnections()
			// getWith reports too whether the connection of the last try
			// was a new one (Go's client tries a request again on a new
			// connection when a kept-alive one closes before answering).
			getWith := func(client *http.Client, key string) (status int, body []byte, fresh bool, err error) {
				req, _ := http.NewRequest("GET", "http://"+GatewayAddr+server, nil)
				req.Header.Set("X-API-Key", key)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					GotConn: func(c httptrace.GotConnInfo) { fresh = !c.Reused },
				}))
				resp, err := client.Do(req)
				if err != nil {
					return 0, nil, fresh, err
				}
				defer resp.Body.Close()
				body, err = io.ReadAll(resp.Body)
				return resp.StatusCode, body, fresh, err
			}
			LoadCaddyfile(t, config(0))

			var sent, failed, reset atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						status, body, fresh, err := getWith(client, KeyA)
						sent.Add(1)
						if status == 0 && fresh {
							// No answer on a new connection: Caddy's
							// listener handover, which resets the
							// connections still queued on the old config's
							// socket when it closes (plain Caddy does it
							// too; docs/operating.md, "Reloads"). Nothing a
							// handler can answer; the client sends again.
							reset.Add(1)
							continue
						}
						if err != nil || status != http.StatusOK || !bytes.Equal(body, want) {
							if failed.Add(1) <= 3 {
								t.Errorf("the kept key: %d %s (err %v)", status, Clip(body), err)
							}
						}
					}
				})
			}
			refused := func(key, when string) {
				t.Helper()
				status, body, fresh, err := getWith(pinned, key)
				for try := 1; status == 0 && fresh && try < 3; try++ {
					status, body, fresh, err = getWith(pinned, key) // the listener handover, as above
				}
				if status != http.StatusNotFound {
					t.Errorf("reload %s: the removed key got %d %s (err %v), want the new config's 404", when, status, Clip(body), err)
				}
			}
			for i := 1; i <= 20; i++ {
				before := sent.Load()
				fixture.WaitFor(t, "the kept key's clients to send", func() bool { return sent.Load() >= before+4 })
				removed := keys[(i-1)%2]
				if status, body, _, err := getWith(pinned, KeyA); status != http.StatusOK {
					t.Fatalf("before reload %d: %d %s (err %v)", i, status, Clip(body), err)
				}
				old := caddy.ActiveContext()
				caddyfile := config(i)
				loaded := make(chan error, 1)
				go func() { loaded <- postLoad(caddyfile) }()
				fixture.WaitFor(t, "the new config in force", func() bool {
					active := caddy.ActiveContext()
					return active.Context != nil && active.Done() != old.Done()
				})
				if c.delay && stopping(t, ports[(i-1)%2], loaded) {
					// The old server serves its connections, pinned's
					// among them, until the delay ends.
					if status, body, _, err := getWith(pinned, KeyA); status != http.StatusOK || !bytes.Equal(body, want) {
						t.Errorf("reload %d, during shutdown_delay: the kept key got %d %s (err %v)", i, status, Clip(body), err)
					}
					refused(removed, fmt.Sprintf("%d, during shutdown_delay", i))
				}
				if err := fixture.Recv(t, loaded, "the load's end"); err != nil {
					t.Fatalf("reload %d: %v", i, err)
				}
				refused(removed, fmt.Sprintf("%d, after /load", i))
				AwaitOldListeners(t, Adapt(t, caddyfile))
			}
			close(stop)
			wg.Wait()
			t.Logf("the kept key: %d requests through 20 reloads, %d failed, %d new connections reset by the listener handover", sent.Load(), failed.Load(), reset.Load())
			if failed.Load() != 0 {
				t.Errorf("the kept key: %d of %d requests failed", failed.Load(), sent.Load())
			}
		})
	}
}

// stopping waits until the old config's server on port, which the new
// config does not listen on, says it is shutting down (the old config has
// then had its stopping event), and reports true; or reports false if the
// load returned first (its error is put back in loaded).
func stopping(t *testing.T, port int, loaded chan error) bool {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	ended := false
	fixture.WaitFor(t, "the old server shutting down", func() bool {
		select {
		case err := <-loaded:
			loaded <- err
			ended = true
			return true
		default:
		}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body) == "true"
	})
	return !ended
}

// postLoad loads a Caddyfile through the admin API, as caddy reload does,
// and returns once the load has returned (after the old config's
// shutdown_delay, if any).
func postLoad(caddyfile string) error {
	resp, err := AdminClient.Post(AdminURL+"/load", "text/caddyfile", strings.NewReader(caddyfile))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	return nil
}
