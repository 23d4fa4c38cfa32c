package control

import (
	"crypto/rand"
	"time"

	"relay/internal/supervisor"
)

// TicketKeyRotation is how often the control makes a new session-ticket
// key between reloads.
const TicketKeyRotation = 24 * time.Hour

// TLS session tickets let a client that comes back skip most of a
// handshake: the ticket it got holds its session, encrypted under a key
// only relay knows. Each process left to itself would make its own keys,
// and a client whose next connection landed on another process could not
// resume. So the control makes the keys and every process takes them with
// the configuration, as nginx's workers share the keys their master made.
//
// A new key comes every TicketKeyRotation (as Go's own keys do) and at
// every reload: the newest encrypts new tickets, and the previous ones
// still decrypt the tickets they issued, so a rotation ends no
// resumption, while a key is forgotten within three rotations, which
// bounds what a stolen key can decrypt (forward secrecy). The same holds
// with one process, which takes its keys from the control like the
// others.

// keptTicketKeys is how many keys decrypt: the newest and the ones of the
// last rotations (daily or at a reload).
const keptTicketKeys = 3

// nextTicketKeys returns a fresh key followed by the newest of prev.
func nextTicketKeys(prev [][]byte) [][]byte {
	k := make([]byte, supervisor.TicketKeyLen)
	rand.Read(k)
	keys := append([][]byte{k}, prev...)
	if len(keys) > keptTicketKeys {
		keys = keys[:keptTicketKeys]
	}
	return keys
}

// RotateTickets makes a new session-ticket key and sends the keys to every
// process; a process started later gets them with its configuration.
func (l *Control) RotateTickets() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.config.TicketKeys = nextTicketKeys(l.config.TicketKeys)
	l.broadcastLocked(supervisor.Message{Kind: supervisor.KindTickets, Tickets: l.config.TicketKeys})
}
