package supervisor

import "crypto/rand"

// TLS session tickets let a client that comes back skip most of a
// handshake: the ticket it got holds its session, encrypted under a key
// only relay knows. Each process left to itself would make its own keys,
// and a client whose next connection landed on another process could not
// resume. So the control makes the keys and every process takes them with
// the configuration, as nginx's workers share the keys their master made.
//
// The keys change at every reload, like nginx's: the newest encrypts new
// tickets, and the previous ones still decrypt the tickets they issued, so
// a reload ends no resumption. Without a reload a key lives as long as
// relay runs (Go's own keys, used by a relay of one process with no
// reload yet, rotate daily).

// keptTicketKeys is how many keys decrypt: the newest and the ones of the
// last reloads.
const keptTicketKeys = 3

// TicketKeyLen is the length of a session-ticket key (crypto/tls's).
const TicketKeyLen = 32

// nextTicketKeys returns a fresh key followed by the newest of prev.
func nextTicketKeys(prev [][]byte) [][]byte {
	k := make([]byte, TicketKeyLen)
	rand.Read(k)
	keys := append([][]byte{k}, prev...)
	if len(keys) > keptTicketKeys {
		keys = keys[:keptTicketKeys]
	}
	return keys
}
