package protect

// A client that hangs up does not end the backend's work (the plugin's JDK
// server works off a request whose client left): the request keeps its slot,
// its main-thread lane and its client's place until the backend answers
// (docs/backend-protection.md, "A trip counts until the backend is done").

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestHangUpsKeepTheirPlaces: one anonymous address asks for 12 players
// nobody else asks for, each client hanging up as soon as its request is at
// the backend (or queued), and asking again when refused: the backend never
// holds more than the client's four places (max_per_client), nor, for
// /placeholders, more than the one main-thread lane, and the same with
// HTTP/2 streams reset by their client on one connection; and once the backend
// is done with them, the places are back. Both forms, at the defaults but
// for the budget, which is off so that nothing but the backend's answer
// ends a request.
func TestHangUpsKeepTheirPlaces(t *testing.T) { Forms(t, testHangUpsKeepTheirPlaces) }

func testHangUpsKeepTheirPlaces(t *testing.T, legacy bool) {
	for _, c := range []struct {
		name   string
		target func(i int) string
		most   int32 // what the backend may hold
		// refusals: the client's places are the bound, and past them it
		// is refused; else the lane is, and the others wait in the queue.
		refusals bool
		h2       bool // streams of one HTTP/2 connection, reset
	}{
		{"player", PlayerN, 4, true, false},
		{"placeholders", func(i int) string {
			return "/api/v1/placeholders?uuid=" + Alex + "&p=%25n" + strconv.Itoa(i) + "%25"
		}, 1, false, false},
		{"player over HTTP/2", PlayerN, 4, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := NewGatedBackend(t)
			Gateway{Upstream: be.Addr(), Legacy: legacy, Shared: true, Statusgate: []string{
				"key " + KeyA, "timeout off", "max_main_thread 1", "require_key placeholders off",
			}, Global: []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\tprotocols h1 h2c\n\t}"}}.Start(t)
			hang := hangUp
			if c.h2 {
				client := H2C()
				hang = func(t *testing.T, be *GatedBackend, target string) int { return resetStream(t, client, be, target) }
			}
			refused := 0
			for i := range 12 {
				// Refused while the backend holds the client's places:
				// asked again a few times, so that a place given back
				// when a client hung up would be taken.
				for range 4 {
					status := hang(t, be, c.target(i))
					if status == 0 {
						break
					}
					if status != http.StatusTooManyRequests {
						t.Fatalf("request %d: %d, want it at the backend or 429", i, status)
					}
					refused++
					time.Sleep(10 * time.Millisecond)
				}
			}
			if p := be.Peak.Load(); p > c.most {
				t.Errorf("the backend held %d requests at once whose clients had hung up, want at most %d", p, c.most)
			}
			if c.refusals && refused == 0 {
				t.Error("no request was refused: the hung-up requests' places were given back")
			}
			// Once the backend has answered them all, the client's places
			// are back.
			be.Open()
			fixture.WaitFor(t, "the backend done", func() bool { return be.InFlight.Load() == 0 })
			fixture.WaitFor(t, "the places back", func() bool {
				got, _ := ScrapeURL(t, AdminURL+"/metrics")
				return got[`caddy_http_statusgate_backend_requests_in_flight{guard=""}`] == 0
			})
			if r := Send(t, "GET", c.target(99)); r.Status != 200 {
				t.Errorf("after the backend was done: %d %s", r.Status, Clip(r.Body))
			}
		})
	}
}

// hangUp sends a request for target from a client that hangs up as soon as
// the request is at the backend or waits in the guard's queue; it returns 0
// then, or the status of an answer that came first.
func hangUp(t *testing.T, be *GatedBackend, target string) int {
	t.Helper()
	conn, err := net.Dial("tcp", GatewayAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, GatewayAddr)
	return awaitHangUp(t, be, func() (*http.Response, error) { return http.ReadResponse(bufio.NewReader(conn), nil) })
}

// resetStream is hangUp for a stream of client's HTTP/2 connection, which
// it resets.
func resetStream(t *testing.T, client *http.Client, be *GatedBackend, target string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // RST_STREAM
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+GatewayAddr+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return awaitHangUp(t, be, func() (*http.Response, error) { return client.Do(req) })
}

// awaitHangUp waits until a request is at the backend, waits in the guard's
// queue, or is answered (answer, run on a goroutine of its own, returns):
// 0 for the first two, the answer's status for the last.
func awaitHangUp(t *testing.T, be *GatedBackend, answer func() (*http.Response, error)) int {
	t.Helper()
	answered := make(chan int, 1)
	go func() {
		res, err := answer()
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	status := -1
	fixture.WaitFor(t, "the request at the backend, queued or answered", func() bool {
		select {
		case status = <-answered:
			return true
		case <-be.Entered:
			status = 0
			return true
		default:
		}
		got, _ := ScrapeURL(t, AdminURL+"/metrics")
		if got[`caddy_http_statusgate_backend_requests_queued{class="anonymous",guard=""}`] > 0 {
			status = 0
			return true
		}
		return false
	})
	return status
}
