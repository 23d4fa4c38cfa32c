package acme

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"

	"relay/internal/certstore"
	"relay/internal/config"
	"relay/internal/discovery"
)

// storageLease is the lease of the etcd and Redis storages' locks: a
// holder that dies frees its locks within it.
const storageLease = 10 * time.Second

// SettingsOf turns the acme section of cfg into a manager's settings,
// with the storage it names open; closeStorage releases it. tlsListen is
// the TLS listener's address (cfg.TLSListen, or the address bound when
// its port was 0).
func SettingsOf(cfg *config.Config, tlsListen string) (s Settings, closeStorage func(), err error) {
	a := cfg.ACME
	host, port, err := net.SplitHostPort(tlsListen)
	if err != nil {
		return Settings{}, nil, fmt.Errorf("tls_listen %q: %w", tlsListen, err)
	}
	tlsPort, _ := strconv.Atoi(port)
	s = Settings{
		CA: a.CA, Email: a.Email, Names: NamesOf(cfg), KeyType: a.KeyType,
		HTTP01: slices.Contains(a.Challenges, "http-01"), TLSALPN01: slices.Contains(a.Challenges, "tls-alpn-01"),
		ListenHost: host, TLSPort: tlsPort, CheckInterval: a.CheckInterval, OnDemand: onDemandOf(a.OnDemand),
	}
	if cfg.Listen != "" {
		if _, p, err := net.SplitHostPort(cfg.Listen); err == nil {
			s.HTTPPort, _ = strconv.Atoi(p)
		}
	}
	if a.CARoot != "" {
		b, err := os.ReadFile(a.CARoot)
		if err != nil {
			return Settings{}, nil, fmt.Errorf("acme.ca_root: %w", err)
		}
		s.Roots = x509.NewCertPool()
		if !s.Roots.AppendCertsFromPEM(b) {
			return Settings{}, nil, fmt.Errorf("acme.ca_root: %q holds no PEM certificate", a.CARoot)
		}
	}
	closeStorage = func() {}
	switch a.Storage.Type {
	case "etcd":
		cli, err := discovery.NewClient(cfg.Discovery.Etcd)
		if err != nil {
			return Settings{}, nil, fmt.Errorf("acme.storage: etcd: %w", err)
		}
		s.Storage = certstore.NewEtcd(cli, certstore.EtcdOptions{Prefix: a.Storage.Prefix, Lease: storageLease})
		closeStorage = func() { cli.Close() }
	case "redis":
		r := cfg.Redis
		cli := redis.NewClient(&redis.Options{Addr: r.Address, Username: r.Username, Password: r.Password, DB: r.DB,
			Protocol: 2, DisableIdentity: true})
		s.Storage = certstore.NewRedis(cli, certstore.RedisOptions{Prefix: a.Storage.Prefix, Lease: storageLease})
		closeStorage = func() { cli.Close() }
	default:
		s.Storage = &certmagic.FileStorage{Path: a.Storage.Dir}
	}
	return s, closeStorage, nil
}

// NamesOf are the names of cfg's acme.domains relay orders: those no
// tls_certificates entry covers. A reload makes them the manager's
// (Manager.SetNames), so a file that a reload adds for a name ends its
// orders and renewals, and one it removes orders the name again.
func NamesOf(cfg *config.Config) []string {
	if cfg.ACME == nil {
		return nil
	}
	return notInFiles(cfg.ACME.Domains, cfg.TLSCertificates)
}

// notInFiles are the names no certificate of files covers: a name with a
// certificate of its own is never ordered. A file that does not load
// covers nothing (relay -check names it).
func notInFiles(names []string, files []config.Certificate) []string {
	var leaves []*x509.Certificate
	for _, f := range files {
		pair, err := config.LoadCertificate(f)
		if err != nil {
			continue
		}
		if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
			leaves = append(leaves, leaf)
		}
	}
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(leaves, func(l *x509.Certificate) bool { return l.VerifyHostname(n) == nil }) {
			out = append(out, n)
		}
	}
	return out
}
