package hold

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// k is the unit of these tests' sizes: answers above small.
const k = Small + 1

// answer is a distinct answer of n units.
func answer(n int) []byte { return make([]byte, n*k) }

// hold is Hold of the Budget's own share that fails the test on an error.
func hold(t *testing.T, b *Budget, client string, answer []byte) *Claim {
	t.Helper()
	c, err := b.Hold(client, Share{}, answer)
	if err != nil {
		t.Fatalf("Hold(%s, %d bytes): %v", client, len(answer), err)
	}
	return c
}

func TestBudget(t *testing.T) {
	b := New(100*k, 40*k, 100*k)
	a40 := hold(t, b, "a", answer(40))
	if _, err := b.Hold("a", Share{}, answer(1)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past the share: %v, want ErrClientFull", err)
	}
	if err := b.Check("a", Share{}); !errors.Is(err, ErrClientFull) {
		t.Fatalf("Check at the share: %v", err)
	}
	if err := b.Check("b", Share{}); err != nil {
		t.Fatalf("another client: %v", err)
	}
	b19 := hold(t, b, "b", answer(19))
	if err := b.Check("b", Share{}); err != nil {
		t.Fatalf("a client holding less than half its share may start a request: %v", err)
	}
	b19.Release()
	b20 := hold(t, b, "b", answer(20))
	if err := b.Check("b", Share{}); !errors.Is(err, ErrClientFull) {
		t.Fatalf("a client holding half its share may start none: %v", err)
	}
	b20.Release()
	b40 := hold(t, b, "b", answer(40))
	if _, err := b.Hold("c", Share{}, answer(21)); !errors.Is(err, ErrFull) {
		t.Fatalf("past the total: %v, want ErrFull", err)
	}
	if err := b.Take(Share{}, 20*k); err != nil {
		t.Fatalf("a buffer of no client within the total: %v", err)
	}
	if err := b.Check("c", Share{}); err != nil {
		t.Fatalf("Check with the total spent: %v; want nil: the request may cost it nothing, and what it costs is refused when charged", err)
	}
	if b.Held() != 100*k {
		t.Fatalf("held %d, want 100", b.Held())
	}
	a40.Release()
	b40.Release()
	b.Give(Share{}, 20*k)
	if b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("after giving everything back: held %d, %d clients", b.Held(), len(b.by))
	}
	hold(t, b, "a", answer(40)) // a client's share is whole again
}

// TestShareOfItsOwn checks a client with a share of its own, larger or
// smaller than the Budget's: Hold and Check go by it, and the total still
// bounds everyone.
func TestShareOfItsOwn(t *testing.T) {
	b := New(100*k, 20*k, 100*k)
	big, small := Share{Bytes: 60 * k}, Share{Bytes: 10 * k}
	var claims []*Claim
	for range 2 {
		c, err := b.Hold("key", big, answer(25))
		if err != nil {
			t.Fatalf("within a share of its own larger than the Budget's: %v", err)
		}
		claims = append(claims, c)
	}
	if _, err := b.Hold("key", big, answer(11)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past its own share: %v, want ErrClientFull", err)
	}
	if err := b.Check("key", big); !errors.Is(err, ErrClientFull) {
		t.Fatalf("Check at half its own share: %v", err)
	}
	if err := b.Check("key", Share{Bytes: 101 * k}); err != nil {
		t.Fatalf("Check below half a larger share: %v", err)
	}
	if _, err := b.Hold("bot", small, answer(11)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past a share of its own smaller than the Budget's: %v", err)
	}
	if _, err := b.Hold("other", Share{Bytes: 100 * k}, answer(51)); !errors.Is(err, ErrFull) {
		t.Fatalf("a share past what the total has left: %v, want ErrFull", err)
	}
	for _, c := range claims {
		c.Release()
	}
	if b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("held %d, %d clients", b.Held(), len(b.by))
	}
}

// TestByProgress checks a share with a patience: holding half of it, the
// client may start requests while it takes a piece at least every
// patience, and not once it has taken nothing for that long; Hold keeps it
// within its share all along; a share judged by bytes alone is refused at
// half whatever the client takes.
func TestByProgress(t *testing.T) {
	b := New(100*k, 40*k, 100*k)
	c := fixture.NewClock()
	b.SetClock(c.Now)
	const patience = 5 * time.Second
	key, stranger := Share{Patience: patience}, Share{}
	held, err := b.Hold("key", key, answer(30))
	if err != nil {
		t.Fatal(err)
	}
	same, err := b.Hold("stranger", stranger, answer(30))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check("key", key); err != nil {
		t.Fatalf("an answer just held is being taken: %v", err)
	}
	if err := b.Check("stranger", stranger); !errors.Is(err, ErrClientFull) {
		t.Fatalf("judged by bytes, at half the share: %v, want ErrClientFull", err)
	}
	for range 5 {
		c.Advance(patience - time.Millisecond)
		held.Took()
		same.Took()
		if err := b.Check("key", key); err != nil {
			t.Fatalf("a client that took a piece %v ago: %v", patience-time.Millisecond, err)
		}
		if err := b.Check("stranger", stranger); !errors.Is(err, ErrClientFull) {
			t.Fatalf("judged by bytes, taking its answer: %v, want ErrClientFull", err)
		}
	}
	if _, err := b.Hold("key", key, answer(11)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past the share while taking: %v, want ErrClientFull", err)
	}
	c.Advance(patience)
	if err := b.Check("key", key); !errors.Is(err, ErrClientFull) {
		t.Fatalf("a client that took nothing for %v: %v, want ErrClientFull", patience, err)
	}
	// Another hold of the same answer (another stream of a shared
	// answer) is new: it has not had the chance to be taken.
	again, err := b.Hold("key", key, held.answer)
	if err != nil || b.Check("key", key) != nil {
		t.Fatalf("the same answer held again: %v, Check %v", err, b.Check("key", key))
	}
	again.Release()
	held.Release()
	same.Release()
	held.Took() // a writer's last piece after the release: harmless
	if b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("held %d, %d clients", b.Held(), len(b.by))
	}
}

// TestSameAnswerOnce checks that a client holding one answer many times (many
// stalled streams of one cached answer) is charged once, and that another
// client holding it is charged too.
func TestSameAnswerOnce(t *testing.T) {
	b := New(100*k, 40*k, 100*k)
	shared := answer(30)
	var claims []*Claim
	for range 1000 {
		claims = append(claims, hold(t, b, "a", shared))
	}
	if b.Held() != 30*k {
		t.Fatalf("one answer held 1000 times by one client: %d bytes charged, want 30", b.Held())
	}
	if _, err := b.Hold("a", Share{}, answer(30)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("an equal but other answer: %v, want ErrClientFull", err)
	}
	other := hold(t, b, "b", shared)
	if b.Held() != 60*k {
		t.Fatalf("another client holding it: %d charged", b.Held())
	}
	for _, c := range claims[1:] {
		c.Release()
	}
	if b.Held() != 60*k {
		t.Fatalf("released 999 of 1000: %d charged, want 60", b.Held())
	}
	claims[0].Release()
	other.Release()
	if b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("held %d, %d clients", b.Held(), len(b.by))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Release did not panic")
		}
	}()
	claims[0].Release()
}

// TestReleaseTwicePanics: a Claim released twice while other holds of its
// answer remain must not give back theirs.
func TestReleaseTwicePanics(t *testing.T) {
	b := New(100*k, 40*k, 100*k)
	shared := answer(30)
	first, second := hold(t, b, "a", shared), hold(t, b, "a", shared)
	first.Release()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Release did not panic")
			}
		}()
		first.Release()
	}()
	if b.Held() != 30*k {
		t.Fatalf("after a second Release of one of two holds: %d charged, want 30", b.Held())
	}
	second.Release()
}

func TestNilBudget(t *testing.T) {
	var b *Budget
	big := answer(1 << 10) // 1 MiB: answer counts KiB
	c, err := b.Hold("a", Share{}, big)
	if err != nil || c != nil || b.Take(Share{}, 1<<40) != nil || b.Check("a", Share{}) != nil || b.Held() != 0 {
		t.Fatal("the nil Budget refused or counted")
	}
	c.Took()
	c.Release()
	b.Give(Share{}, 1<<40)
}

func TestNewPanics(t *testing.T) {
	for _, c := range [][3]int64{{100, 0, 100}, {100, 101, 100}, {0, 0, 0}, {100, 10, 0}, {100, 10, 101}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d, %d, %d) did not panic", c[0], c[1], c[2])
				}
			}()
			New(c[0], c[1], c[2])
		}()
	}
}

// TestConcurrentHolds checks under -race that concurrent charges never let
// the total or a client's share be exceeded, while writers report progress
// and clients are checked.
func TestConcurrentHolds(t *testing.T) {
	b := New(1000*k, 300*k, 1000*k)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := int64(0)
	for i := range 16 {
		client := string(rune('a' + i%4))
		share := Share{Patience: time.Duration(i%2) * time.Second}
		wg.Go(func() {
			a := answer(7) // held and released in turn: one buffer, not 7 KiB of garbage a turn
			for j := range 2000 {
				switch j % 3 {
				case 0:
					if b.Take(Share{}, 7*k) == nil {
						b.Give(Share{}, 7*k)
					}
					continue
				case 1:
					_ = b.Check(client, share)
					continue
				}
				if c, err := b.Hold(client, share, a); err == nil {
					mu.Lock()
					peak = max(peak, b.Held())
					mu.Unlock()
					c.Took()
					c.Release()
				}
			}
		})
	}
	wg.Wait()
	if peak > 1000*k || b.Held() != 0 {
		t.Fatalf("peak %d (max 1000), held at the end %d", peak, b.Held())
	}
}

// TestSmallNotCounted: answers up to small bytes cost no lock and no charge.
func TestSmallNotCounted(t *testing.T) {
	b := New(100*k, 40*k, 100*k)
	small := make([]byte, Small)
	if c, err := b.Hold("a", Share{}, small); err != nil || c != nil || b.Held() != 0 {
		t.Fatalf("a small answer: %v, %v, %d charged", c, err, b.Held())
	}
}

// TestSetSizes: a lower bound keeps what is held counted and charges nothing
// more until enough is released.
func TestSetSizes(t *testing.T) {
	b := New(1<<20, 1<<20, 1<<20)
	big := hold(t, b, "a", make([]byte, 600<<10))
	b.SetSizes(512<<10, 256<<10, 512<<10)
	if b.Held() != 600<<10 {
		t.Fatalf("Held %d after SetSizes, want the %d still held", b.Held(), 600<<10)
	}
	if err := b.Take(Share{}, 1); err != ErrFull {
		t.Errorf("Take past the lower total: %v, want ErrFull", err)
	}
	big.Release()
	if _, err := b.Hold("b", Share{}, make([]byte, 300<<10)); err != ErrClientFull {
		t.Errorf("Hold past the lower share: %v, want ErrClientFull", err)
	}
	if _, err := b.Hold("b", Share{}, make([]byte, 200<<10)); err != nil {
		t.Errorf("Hold within the new bounds: %v", err)
	}
}

// TestPin checks that bytes a request keeps are charged whatever their size,
// beside the answers a client holds, against its share and the total, and
// given back.
func TestPin(t *testing.T) {
	b := New(100*k, 40*k, 100*k)
	if err := b.Pin("a", Share{}, 100); err != nil || b.Held() != 100 {
		t.Fatalf("a small pin: %v, %d charged; want it charged", err, b.Held())
	}
	claim, err := b.Hold("a", Share{}, answer(30))
	if err != nil {
		t.Fatalf("an answer beside the pin: %v", err)
	}
	defer claim.Release()
	if err := b.Pin("a", Share{}, 10*k); !errors.Is(err, ErrClientFull) {
		t.Fatalf("past the share: %v, want ErrClientFull", err)
	}
	if err := b.Check("a", Share{}); !errors.Is(err, ErrClientFull) {
		t.Fatalf("more than half the share held: Check %v, want ErrClientFull", err)
	}
	for _, c := range []string{"b", "c"} {
		if err := b.Pin(c, Share{}, 30*k); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	if err := b.Pin("d", Share{}, 10*k); !errors.Is(err, ErrFull) {
		t.Fatalf("past the total: %v, want ErrFull", err)
	}
	b.Unpin("a", Share{}, 100)
	b.Unpin("b", Share{}, 30*k)
	b.Unpin("c", Share{}, 30*k)
	if b.Held() != 30*k || len(b.by) != 1 {
		t.Fatalf("after the unpins: %d held by %d clients, want the answer's 30 KiB by one", b.Held(), len(b.by))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Unpin without Pin did not panic")
		}
	}()
	b.Unpin("b", Share{}, 1)
}

// TestAnonymousPool: what anonymous clients hold together, pinned, held or
// taken for them, stops at the anonymous pool, however many clients hold
// it; a keyed client is charged the rest of the total then, and only the
// total bounds it. Giving back makes room in the pool again.
func TestAnonymousPool(t *testing.T) {
	b := New(100*k, 20*k, 50*k)
	keyed := Share{Bytes: 60 * k, Keyed: true}
	for _, c := range []string{"a", "b"} {
		if err := b.Pin(c, Share{}, 20*k); err != nil {
			t.Fatalf("pin of %s within the pool: %v", c, err)
		}
	}
	if err := b.Take(Share{}, 5*k); err != nil {
		t.Fatalf("a buffer of an anonymous client within the pool: %v", err)
	}
	if err := b.Pin("c", Share{}, 5*k+1); !errors.Is(err, ErrFull) {
		t.Fatalf("a pin one byte past the pool: %v, want ErrFull", err)
	}
	if err := b.Pin("c", Share{}, 5*k); err != nil {
		t.Fatalf("a pin that fills the pool to the byte: %v", err)
	}
	if b.Anonymous() != 50*k || b.Held() != 50*k {
		t.Fatalf("anonymous %d, held %d; want the pool, 50 units, both", b.Anonymous(), b.Held())
	}
	if _, err := b.Hold("d", Share{}, answer(1)); !errors.Is(err, ErrFull) {
		t.Fatalf("an anonymous answer with the pool full: %v, want ErrFull", err)
	}
	if err := b.Take(Share{}, 1); !errors.Is(err, ErrFull) {
		t.Fatalf("an anonymous buffer with the pool full: %v, want ErrFull", err)
	}
	if err := b.Check("d", Share{}); err != nil {
		t.Fatalf("Check of a client holding nothing, the pool full: %v", err)
	}
	held, err := b.Hold("key", keyed, answer(30))
	if err != nil {
		t.Fatalf("a keyed answer with the pool full: %v", err)
	}
	if err := b.Take(Share{Keyed: true}, 20*k); err != nil {
		t.Fatalf("a keyed buffer up to the total: %v", err)
	}
	if err := b.Take(Share{Keyed: true}, 1); !errors.Is(err, ErrFull) {
		t.Fatalf("a keyed buffer past the total: %v, want ErrFull", err)
	}
	b.Give(Share{Keyed: true}, 20*k)
	held.Release()
	b.Unpin("c", Share{}, 5*k)
	if err := b.Take(Share{}, 5*k); err != nil {
		t.Fatalf("an anonymous buffer once a pin is given back: %v", err)
	}
	b.Give(Share{}, 5*k)
	b.Give(Share{}, 5*k)
	b.Unpin("a", Share{}, 20*k)
	b.Unpin("b", Share{}, 20*k)
	if b.Anonymous() != 0 || b.Held() != 0 || len(b.by) != 0 {
		t.Fatalf("after giving everything back: anonymous %d, held %d, %d clients", b.Anonymous(), b.Held(), len(b.by))
	}
}

// TestLend: an answer lent (a cache hit) is counted once in Held however
// many clients hold it, in the anonymous pool once while an anonymous client
// holds it, and charged to each client's share, which still bounds it; it
// is refused past the total or the pool, so that what clients hold of
// answers the cache let go stays within the maximum (50 addresses stalling
// cache hits of 50 answers).
func TestLend(t *testing.T) {
	b := New(100*k, 40*k, 50*k)
	if err := b.Pin("key", Share{Bytes: 50 * k, Keyed: true}, 40*k); err != nil {
		t.Fatal(err)
	}
	cached := answer(30)
	var claims []*Claim
	for _, c := range []string{"a", "b", "a"} {
		cl, err := b.Lend(c, Share{}, cached)
		if err != nil {
			t.Fatalf("%s: a cached answer: %v", c, err)
		}
		claims = append(claims, cl)
	}
	if b.Held() != 70*k || b.Anonymous() != 30*k {
		t.Fatalf("held %d, anonymous %d; want the 40 units pinned and the cached answer once", b.Held(), b.Anonymous())
	}
	if _, err := b.Lend("a", Share{}, answer(11)); !errors.Is(err, ErrClientFull) {
		t.Fatalf("a cached answer past the client's share: %v, want ErrClientFull", err)
	}
	if err := b.Check("a", Share{}); !errors.Is(err, ErrClientFull) {
		t.Fatalf("Check of a client holding more than half its share lent: %v", err)
	}
	// Another answer the cache let go, for another address: past the
	// anonymous pool it is refused, not lent beyond every bound.
	if _, err := b.Lend("c", Share{}, answer(21)); !errors.Is(err, ErrFull) {
		t.Fatalf("a second cached answer past the anonymous pool: %v, want ErrFull", err)
	}
	// A key's hold of the same answer adds nothing to the total; its own
	// answer is refused past it.
	kc, err := b.Lend("key2", Share{Bytes: 80 * k, Keyed: true}, cached)
	if err != nil || b.Held() != 70*k {
		t.Fatalf("a key holding the answer lent already: %v, held %d", err, b.Held())
	}
	if _, err := b.Lend("key2", Share{Bytes: 80 * k, Keyed: true}, answer(31)); !errors.Is(err, ErrFull) {
		t.Fatalf("a keyed answer past the total: %v, want ErrFull", err)
	}
	for _, cl := range claims {
		cl.Release()
	}
	if b.Held() != 70*k || b.Anonymous() != 0 {
		t.Fatalf("the anonymous holders gone, the key still holding it: held %d, anonymous %d", b.Held(), b.Anonymous())
	}
	kc.Release()
	b.Unpin("key", Share{Bytes: 50 * k, Keyed: true}, 40*k)
	if b.Held() != 0 || b.Anonymous() != 0 || len(b.by) != 0 || len(b.lentBy) != 0 {
		t.Fatalf("after giving everything back: held %d, anonymous %d, %d clients, %d lent", b.Held(), b.Anonymous(), len(b.by), len(b.lentBy))
	}
}

// TestKeepIsNotJudged: what a client keeps through Keep (a keyed topic's
// event) counts in its share and the total, but Check does not refuse the
// client for it; an event is judged small on its answer, not its framing.
func TestKeepIsNotJudged(t *testing.T) {
	b := New(100*k, 40*k, 50*k)
	ev := answer(30)
	c, err := b.Keep("key", Share{Bytes: 40 * k, Keyed: true}, ev, len(ev)-64)
	if err != nil || b.Held() != 30*k {
		t.Fatalf("a kept event: %v, held %d", err, b.Held())
	}
	if err := b.Check("key", Share{Bytes: 40 * k, Keyed: true}); err != nil {
		t.Errorf("a key keeping a topic's event of more than half its share: %v", err)
	}
	if _, err := b.Lend("key", Share{Bytes: 40 * k, Keyed: true}, answer(11)); !errors.Is(err, ErrClientFull) {
		t.Errorf("past its share with what it keeps: %v, want ErrClientFull", err)
	}
	c.Release()
	framed := make([]byte, Small+64)
	if c, err := b.LendEvent("a", Share{}, framed, Small); c != nil || err != nil || b.Held() != 0 {
		t.Errorf("an event of a small answer: %v %v, held %d", c, err, b.Held())
	}
}

// TestHoldTwoClasses: one client that holds one answer as an anonymous
// caller and as a keyed one (a network's builds for both classes hold a
// member's answer under one holder) gives the bytes back to the class they
// were charged in, whichever Claim is released last.
func TestHoldTwoClasses(t *testing.T) {
	for _, anonLast := range []bool{false, true} {
		b := New(100*k, 40*k, 50*k)
		body := answer(4)
		anon, err := b.Hold("network main", Share{}, body)
		if err != nil {
			t.Fatal(err)
		}
		keyed, err := b.Hold("network main", Share{Keyed: true}, body)
		if err != nil {
			t.Fatal(err)
		}
		if anonLast {
			keyed.Release()
			anon.Release()
		} else {
			anon.Release()
			keyed.Release()
		}
		if b.Held() != 0 || b.Anonymous() != 0 {
			t.Errorf("anonymous released last %v: held %d, anonymous %d, want 0 and 0", anonLast, b.Held(), b.Anonymous())
		}
	}
}
