// Package acme keeps relay's certificates by themselves: it orders them
// from an ACME CA (Let's Encrypt, or any CA that speaks RFC 8555),
// renews them, and keeps them in storage that every relay instance may
// share, through certmagic.
//
// One Manager runs per relay instance, in its control: it is the one
// part of relay that talks to the CA. What it has in hand it hands to
// its publish function, which the control sends to every serving
// process; the serving processes answer the CA's challenges by asking
// the manager (Challenge), which looks in memory first and then in the
// shared storage, so a challenge one instance started can be answered by
// any instance the CA happens to reach.
//
// On demand (ondemand.go, ondemandserving.go), a handshake for a name
// relay holds nothing for asks the manager, through the control, for a
// certificate; the manager judges the name (allow, the ask URL, the
// per-minute cap) and obtains it, once however many handshakes ask.
//
// Exactly one order per name, across instances: certmagic takes the
// storage's lock named after the certificate before it orders, and after
// taking it looks in storage again, so an instance that waited for
// another's order loads the other's certificate instead of ordering its
// own. The etcd and Redis storages (internal/certstore) hold their locks
// under leases, so a holder that dies frees its locks within one lease.
package acme
