package hblock

// static is HPACK's static table (RFC 7541 Appendix A); index i is
// static[i-1].
var static = [...]struct{ name, value string }{
	{":authority", ""},
	{":method", "GET"},
	{":method", "POST"},
	{":path", "/"},
	{":path", "/index.html"},
	{":scheme", "http"},
	{":scheme", "https"},
	{":status", "200"},
	{":status", "204"},
	{":status", "206"},
	{":status", "304"},
	{":status", "400"},
	{":status", "404"},
	{":status", "500"},
	{"accept-charset", ""},
	{"accept-encoding", "gzip, deflate"},
	{"accept-language", ""},
	{"accept-ranges", ""},
	{"accept", ""},
	{"access-control-allow-origin", ""},
	{"age", ""},
	{"allow", ""},
	{"authorization", ""},
	{"cache-control", ""},
	{"content-disposition", ""},
	{"content-encoding", ""},
	{"content-language", ""},
	{"content-length", ""},
	{"content-location", ""},
	{"content-range", ""},
	{"content-type", ""},
	{"cookie", ""},
	{"date", ""},
	{"etag", ""},
	{"expect", ""},
	{"expires", ""},
	{"from", ""},
	{"host", ""},
	{"if-match", ""},
	{"if-modified-since", ""},
	{"if-none-match", ""},
	{"if-range", ""},
	{"if-unmodified-since", ""},
	{"last-modified", ""},
	{"link", ""},
	{"location", ""},
	{"max-forwards", ""},
	{"proxy-authenticate", ""},
	{"proxy-authorization", ""},
	{"range", ""},
	{"referer", ""},
	{"refresh", ""},
	{"retry-after", ""},
	{"server", ""},
	{"set-cookie", ""},
	{"strict-transport-security", ""},
	{"transfer-encoding", ""},
	{"user-agent", ""},
	{"vary", ""},
	{"via", ""},
	{"www-authenticate", ""},
}

// staticNames maps a name to its first index in the static table.
var staticNames = func() map[string]uint64 {
	m := make(map[string]uint64, len(static))
	for i := len(static) - 1; i >= 0; i-- {
		m[static[i].name] = uint64(i + 1)
	}
	return m
}()

// staticIndex returns the static table's index of name with value (full)
// or, failing that, of name alone; 0 when the name is not in it.
func staticIndex(name, value string) (idx uint64, full bool) {
	first, ok := staticNames[name]
	if !ok {
		return 0, false
	}
	for i := first; i <= uint64(len(static)) && static[i-1].name == name; i++ {
		if static[i-1].value == value {
			return i, true
		}
	}
	return first, false
}
