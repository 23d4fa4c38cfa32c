// Package route is relay's routing table: it decides which route, and so
// which pool, a request goes to, and what path the backend gets.
//
// # One normal form for paths
//
// The path a route matches is the path relay forwards. Both are the
// request target's path in one normal form, built in this order:
//
//  1. The target is split at its first "?": the path before it is
//     normalised, the query after it is passed through unchanged. The
//     target "*" (OPTIONS) is left as "*" and matches only routes without
//     a path condition.
//  2. Percent-escapes of unreserved characters (ALPHA DIGIT "-" "." "_"
//     "~") are decoded; every other escape keeps its encoding with its hex
//     digits upper-cased ("%2f" becomes "%2F"). A byte that may not appear
//     in a path (space, '"', "#", "<", ">", "[", "]", "^", "`", "{", "|",
//     "}", controls, non-ASCII) is percent-encoded. A "%" that does not
//     start an escape is refused.
//  3. "%2F", "%5C" and a raw backslash are handled by the table's
//     EscapedSlashes mode. Reject (the default) refuses the request: many
//     backends decode them, and "/public/..%2Fadmin" would then reach a
//     backend that reads "/admin" through a route for "/public". Decode
//     turns each into "/" before the next step, so it separates segments
//     like any "/". Keep leaves them as they are (escapes still encoded, a
//     backslash raw) and does not treat them as separators: only for
//     backends known to keep them as data.
//  4. Dot segments are removed as RFC 3986 section 5.2.4 says: "." is
//     dropped and ".." removes the segment before it, whether written
//     plainly or as "%2e". A ".." at the root is dropped: a path cannot
//     climb above "/" (it is clamped, not refused). A path that ends in
//     "/.", "/.." or "/" keeps a trailing "/".
//  5. Repeated slashes are merged into one.
//
// The result starts with "/", holds no "//" and no "." or ".." segment, and
// is its own normal form. A route's path and path prefix must be written in
// normal form (New says which form to write otherwise), so a request and a
// route are compared as the same kind of text, and "/public/../admin",
// "/public/%2e%2e/admin" and "//admin" are all "/admin" to every route.
//
// A route that rewrites (strip or replace its path prefix) forwards the
// rewritten path in normal form again, so a rewrite never produces "//" or
// a dot segment.
//
// # Matching
//
// A route matches when every condition it gives holds: host (exact, or
// "*.suffix" for any name ending in ".suffix" on a label boundary; the
// request's host compared without its port and one trailing dot, ignoring
// case; a request with an empty or malformed host matches no host rule),
// path (exact), path prefix (segment-wise: "/api" matches "/api", "/api/"
// and "/api/x" but not "/apix"; a prefix ending in "/" matches paths
// starting with it), methods (exact, case-sensitive), headers (name ignoring
// case; the value exact against any field of that name, or "" for present)
// and query parameters (name exact; the value compared after decoding
// percent-escapes and "+" as a space, or "" for present). The first route in
// order that matches wins.
//
// A Table is built once per configuration and is immutable: any number of
// goroutines may call Match at once, each with its own reusable Match, and
// Match allocates nothing once the Match's buffers have grown.
package route
