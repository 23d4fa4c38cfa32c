package control

import (
	"crypto/rand"
	"encoding/hex"
)

// A request relay forwards carries relay's Via entry, "1.1 relay-ID"; one
// that arrives carrying it again has come back through a backend (or
// something behind one) and would go round until descriptors or timeouts
// run out, so the core answers it 508 at once. ID is the instance id: made
// by the control when relay starts, random so that two relay instances in
// a chain never share one, and handed to every serving process with the
// configuration (ConfigSource.Instance), so a request that went out
// through one process and came back to another is known too. Reloads and
// restarted processes keep it.

// instanceBytes is the instance id's random bytes: 64 bits make two
// relays alike once in billions of pairs.
const instanceBytes = 8

// newInstance is a fresh instance id, as lower-case hex.
func newInstance() string {
	b := make([]byte, instanceBytes)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// stickyKeyBytes is the length of the sticky-cookie key the control makes
// (ConfigSource.StickyKey): HMAC-SHA256's block of security.
const stickyKeyBytes = 32

// newStickyKey is a fresh key for the sticky cookies of pools that set
// none. Like the instance id it lives as long as relay: every process gets
// it, a reload keeps it, so clients keep their backends through both.
func newStickyKey() []byte {
	k := make([]byte, stickyKeyBytes)
	rand.Read(k)
	return k
}
