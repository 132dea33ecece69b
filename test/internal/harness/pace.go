package harness

import (
	"bytes"
	"io"
	"time"
)

// PieceSize is what ReadAtPace reads before each pause: the gateway's own
// write piece.
const PieceSize = 32 << 10

// ReadAtPace reads r whole as a client on a network does, not one on
// loopback: a piece of PieceSize at a time, with a pause of pace after each
// (0: none). It returns what it read, and the error that ended it early.
func ReadAtPace(r io.Reader, pace time.Duration) ([]byte, error) {
	var body bytes.Buffer
	for {
		_, err := io.CopyN(&body, r, PieceSize)
		if err == io.EOF {
			return body.Bytes(), nil
		}
		if err != nil {
			return body.Bytes(), err
		}
		if pace > 0 {
			time.Sleep(pace)
		}
	}
}
