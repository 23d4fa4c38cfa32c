package config

import (
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeTrustedProxies reads trusted_proxies: CIDR ranges or single
// addresses. Host bits in a range are cleared (10.1.2.3/8 means 10.0.0.0/8),
// since that is what a match against it does anyway.
func decodeTrustedProxies(d *decoder, c *Config, v *yaml.Node) {
	items, ok := d.strList(v, "trusted_proxies")
	if !ok {
		return
	}
	c.TrustedProxies = c.TrustedProxies[:0]
	for i, it := range items {
		p, err := parseTrustedProxy(it.value)
		if err != nil {
			d.problem(it.line, fmt.Sprintf("trusted_proxies[%d]", i), "%v", err)
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, p)
	}
}

func parseTrustedProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%s is not a CIDR range such as 10.0.0.0/8 or fd00::/8", quote(s))
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s is not an IP address or a CIDR range such as 10.0.0.0/8", quote(s))
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%s: IPv6 zones are not supported in trusted_proxies", quote(s))
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
