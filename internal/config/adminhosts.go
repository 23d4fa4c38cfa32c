package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeAdminAllowedHosts reads admin_allowed_hosts: the names, besides
// the admin listener's own address, by which clients reach the admin
// listener (a name behind a reverse proxy, a Kubernetes Service, a port
// published by a container runtime). Each entry is a host name or an IP
// address, alone (any port) or with a port. A bad entry is reported and
// skipped.
func decodeAdminAllowedHosts(d *decoder, c *Config, v *yaml.Node) {
	items, ok := d.strList(v, "admin_allowed_hosts")
	if !ok {
		return
	}
	var hosts []string
	for i, it := range items {
		h, err := ParseAllowedHost(it.value)
		if err != nil {
			d.problem(it.line, fmt.Sprintf("admin_allowed_hosts[%d]", i), "%v", err)
			continue
		}
		hosts = append(hosts, h)
	}
	c.AdminAllowedHosts = hosts
}

// ParseAllowedHost checks one admin_allowed_hosts entry, HOST or
// HOST:PORT, and returns it in the form a Host header would carry it:
// a lower-case name, the shortest form of an IP address, an IPv6 address
// in brackets ("[::1]", "[::1]:9901").
func ParseAllowedHost(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", fmt.Errorf("is empty; give a host name or address, such as relay-admin.internal or 10.0.0.5:9901")
	case strings.Contains(s, "://"):
		return "", fmt.Errorf("%s is a URL; give the host alone, as it appears in the Host header (relay-admin.internal:9901)", quote(s))
	case strings.ContainsAny(s, "/*@?#"):
		return "", fmt.Errorf("%s is not a host name, an IP address or either with :PORT (wildcards and paths are not supported)", quote(s))
	}
	host, port, withPort := s, "", false
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if h, p, err := net.SplitHostPort(s); err == nil {
			host, port, withPort = h, p, true
		} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			host = s[1 : len(s)-1]
		} else {
			return "", fmt.Errorf("%s is not HOST or HOST:PORT", quote(s))
		}
	}
	if withPort {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", fmt.Errorf("port %s in %s is not a number from 1 to 65535", quote(port), quote(s))
		}
	}
	a, err := netip.ParseAddr(host)
	if strings.HasPrefix(s, "[") && (err != nil || !a.Is6()) {
		return "", fmt.Errorf("%s: only an IPv6 address goes in brackets", quote(s))
	}
	if err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("%s: IPv6 zones are not supported in admin_allowed_hosts", quote(s))
		}
		host = a.String()
	} else if strings.Contains(host, ":") {
		return "", fmt.Errorf("%s is not HOST or HOST:PORT (an IPv6 address with a port needs brackets: [::1]:9901)", quote(s))
	} else if !validHost(host) {
		return "", fmt.Errorf("host %s in %s is not a valid host name or IP address", quote(host), quote(s))
	} else {
		host = strings.ToLower(host)
	}
	if !withPort {
		if strings.Contains(host, ":") {
			return "[" + host + "]", nil
		}
		return host, nil
	}
	return net.JoinHostPort(host, port), nil
}
