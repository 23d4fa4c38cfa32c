// Package config turns relay's YAML file and command-line flags into one
// validated, typed Config: durations are time.Duration, backend addresses are
// *url.URL, proxy ranges are netip.Prefix.
//
// Every problem is reported at once, each with the file and YAML line it came
// from, so an operator fixes a broken file in one pass instead of one error per
// restart. The package is a leaf: it starts nothing and imports no other relay
// package; the caller passes in the algorithm names it accepts.
package config

import (
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"time"

	"relay/internal/trace"
)

// Defaults for every setting. They are what an empty file (plus backends)
// gives, and what examples/config.yml documents.
const (
	DefaultPort                   = 8080
	DefaultAlgorithm              = "round-robin"
	DefaultWeight                 = 1
	DefaultHealthCheckType        = "http"
	DefaultHealthCheckPath        = "/health"
	DefaultHealthCheckInterval    = 10 * time.Second
	DefaultHealthCheckTimeout     = 2 * time.Second
	DefaultHealthCheckRise        = 2
	DefaultHealthCheckFall        = 3
	DefaultHealthCheckReuseConn   = true
	DefaultLogMaxSizeMB           = 100
	DefaultLogMaxBackups          = 5
	DefaultLogMaxAgeDays          = 0
	DefaultLogLevel               = "info"
	DefaultAccessLog              = true
	DefaultAccessLogFormat        = "json"
	DefaultRequestID              = true
	DefaultConnectTimeout         = 5 * time.Second
	DefaultResponseTimeout        = 60 * time.Second
	DefaultClientHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout            = 60 * time.Second
	DefaultShutdownTimeout        = 30 * time.Second
	DefaultMaxIdleConnsPerBackend = 256
	DefaultUpstreamIdleTimeout    = 30 * time.Second
	DefaultTunnelIdleTimeout      = time.Hour
	DefaultMaxConnections         = 16384
	DefaultRetries                = 2
	DefaultWorkers                = 0
	DefaultProcesses              = 1
	DefaultCPUAffinity            = false
	DefaultMaxHeaderBytes         = 16384
	DefaultBreakerFailures        = 5
	DefaultBreakerOpenTime        = 30 * time.Second
	DefaultMaxEjectedPercent      = 50
	DefaultBackendMaxRequests     = 0
	DefaultMaxQueuedRequests      = 1024
	DefaultQueueTimeout           = 5 * time.Second
	DefaultRetryBudgetPercent     = 20
	DefaultRetryBudgetFloor       = 3
	DefaultSlowStart              = 0
	DefaultHashKey                = "client"
	DefaultHashBalanceFactor      = 0
	DefaultMaxBodyBytes           = 0
	// MaxCompressMemoryMB is the largest compress_memory_mb, 1 TiB.
	MaxCompressMemoryMB      = 1 << 20
	DefaultBodyBufferBytes   = 64 << 10
	DefaultClientBodyTimeout = 30 * time.Second
	DefaultClientBodyMinRate = 1024
	DefaultAdminListen       = "127.0.0.1:9901"
	DefaultTLSMinVersion     = "1.2"
	DefaultEscapedSlashes    = "reject"
	DefaultProtocol          = "http/1.1"
	DefaultMaxGRPCTimeout    = 0
)

// MinAdminToken is the shortest admin_token accepted: the token is all that
// guards the admin API once it is reachable beyond this machine.
const MinAdminToken = 16

// MaxProcesses bounds processes: more serving processes than cores only
// multiply health checks and upstream connections.
const MaxProcesses = 256

// Limits that validation enforces.
const (
	// MaxWeight bounds a backend's weight so weighted algorithms can size
	// their tables from it without overflow or huge allocations.
	MaxWeight = 1000
	// MinHeaderBytes and MaxHeaderBytesLimit bound max_header_bytes: below
	// the minimum ordinary browsers' requests fail, above the maximum one
	// client connection could pin a large buffer.
	MinHeaderBytes      = 1024
	MaxHeaderBytesLimit = 1 << 20
	// MaxRetries bounds retries: a request is tried on at most eight
	// backends (the first try and seven retries), which is what the
	// forwarding core remembers in order not to try one twice.
	MaxRetries = 7
	// MaxBodyBufferBytes bounds body_buffer_bytes: each request being
	// read may hold that much memory.
	MaxBodyBufferBytes = 64 << 20
)

// Backend is one upstream server as configured.
type Backend struct {
	// URL is the backend's address: scheme http, a host and a port. After
	// Load or Apply the host is lower-case and the port explicit
	// (http://localhost:8001, http://example.com:80), so the same server
	// always has the same name however it was written.
	URL *url.URL
	// Weight is the backend's relative share of traffic, 1..MaxWeight.
	Weight int
	// MaxRequests caps the requests in flight to the backend; 0 means
	// BackendMaxRequests applies.
	MaxRequests int
	// Protocol is what relay speaks to this backend, "http/1.1", "h2" or
	// "h2c"; "" takes its pool's (Pool.BackendProtocol).
	Protocol string
	// TLS says how relay connects to an https backend: its own settings
	// over the backend_tls_ defaults, after Load or Apply.
	TLS UpstreamTLS
	// Line is the YAML line of the backend's entry, 0 if it came from flags.
	Line int

	// Where the entry came from, so problems name it as the operator wrote
	// it: its key in the file ("backends[3]") even when earlier entries were
	// dropped, the lines of its weight and max_requests, and the URL text
	// before parsing.
	key             string
	weightLine      int
	maxRequestsLine int
	protocolLine    int
	tlsKey          string // the first tls_ key of the entry, where TLS problems are reported
	tlsLine         int
	insecureSet     bool // the entry gave tls_insecure_skip_verify
	raw             string
}

// HealthCheck configures the active health checks run against every backend.
type HealthCheck struct {
	// Type is "http" (GET Path, 2xx is healthy), "tcp" (a connect is
	// healthy) or "grpc" (grpc.health.v1.Health/Check answering SERVING is
	// healthy).
	Type string
	// Path is the request target for http checks; it starts with "/".
	Path string
	// GRPCService is the service grpc checks ask about; "" asks for the
	// server's overall health. Only grpc checks take one.
	GRPCService string
	// Interval is the time between two checks of one backend.
	Interval time.Duration
	// Timeout bounds one check; it is shorter than Interval so checks of one
	// backend never overlap.
	Timeout time.Duration
	// Rise is how many consecutive passes bring a backend back into rotation.
	Rise int
	// Fall is how many consecutive failures take a backend out of rotation.
	Fall int
	// ReuseConnection keeps each backend's http or grpc check connection
	// open from one check to the next; false opens a new one for every
	// check.
	ReuseConnection bool
}

// Config is relay's whole configuration. Load, Parse and Default produce one;
// Apply lays command-line flags over it.
type Config struct {
	// Pool is the pool named "default": the top level's pool keys
	// (backends, algorithm, health checks, timeouts, breakers, caps,
	// upstream TLS). It exists when it has backends or Discovery; with
	// Pools given it may have none.
	Pool
	// Path is the file the configuration was read from, "" if none.
	Path string
	// Listen is the host:port relay accepts clients on. When the file sets
	// listen it wins over port; otherwise it is ":" followed by Port. Its
	// port may be 0, letting the system choose, which tests use.
	Listen string
	// Port is the port from the file or flags, 1..65535.
	Port int
	// TLSListen is the host:port relay accepts TLS clients on; "" turns
	// TLS off. Listen may be "" when TLSListen is set.
	TLSListen string
	// TLSCertificates are the certificates served on TLSListen: the name
	// the client asks for (SNI) picks one, the first is the default.
	TLSCertificates []Certificate `reload:"live"`
	// TLSMinVersion is the oldest TLS version accepted, "1.2" or "1.3".
	TLSMinVersion string `reload:"live"`
	// ClientAuth are the TLS listener's client certificate rules, by the
	// name the client asks for (SNI); empty asks no client for one.
	ClientAuth []ClientAuthRule `reload:"live"`
	// ClientCertHeaders is what backends are told of a verified client
	// certificate (ClientCertHeaderModes); "" decides by ClientAuth
	// (ClientCertHeadersOf). ClientCertPEM adds the certificate itself
	// to fields, as X-Client-Cert. Routes may say otherwise.
	ClientCertHeaders string `reload:"live"`
	ClientCertPEM     bool   `reload:"live"`
	// H2C accepts HTTP/2 without TLS (prior knowledge) on Listen.
	H2C bool
	// Redis is where rate limits with store: redis keep their buckets;
	// nil when the file has no redis section.
	Redis *Redis
	// ACME orders and renews certificates for names no
	// TLSCertificates entry covers; nil when off.
	ACME *ACME
	// Tracing takes part in W3C Trace Context and exports relay's spans
	// over OTLP; nil when off (no section, or no exporter endpoint). A
	// change applies at restart.
	Tracing *trace.Config
	// Discovery finds more backends while relay runs.
	Discovery Discovery `reload:"live"`
	// Pools are the named pools, by name; PoolNames are their names in
	// the order of the file. Every pool key a named pool leaves out holds
	// the top level's value (backends excepted), as of Load or Apply.
	Pools     map[string]*Pool `reload:"live"`
	PoolNames []string         `key:"pools" reload:"live"`
	// Routes pick a pool, or a redirect, for each request: the first whose
	// conditions hold takes it; a request none takes goes to the default
	// pool, or gets 404 when there is none.
	Routes []Route `reload:"live"`
	// EscapedSlashes is what routing does with %2F, %5C and a raw \ in a
	// request path: "reject" (400), "decode" (to / and \, then
	// normalised like any other) or "keep" (left as they are, never a
	// segment boundary). Only used when there are routes.
	EscapedSlashes string `reload:"live"`
	// TrustedProxies are the client address ranges whose X-Forwarded-For is
	// believed; from anyone else the header is replaced. Addresses are
	// compared as they are, so the proxy should unmap IPv4-in-IPv6 peers.
	TrustedProxies []netip.Prefix
	// LogFile is where JSON logs go; "" means standard output.
	LogFile string
	// LogMaxSizeMB is the size at which LogFile is rotated.
	LogMaxSizeMB int
	// LogMaxBackups is how many rotated files are kept; 0 keeps all.
	LogMaxBackups int
	// LogMaxAgeDays is how long rotated files are kept; 0 keeps them forever.
	LogMaxAgeDays int
	// LogLevel is the least severe level logged: debug, info, warn or error.
	LogLevel string `reload:"live"`
	// AccessLog turns the per-request log line on or off.
	AccessLog bool
	// AccessLogFile is where access lines go, rotated as LogFile is (by
	// LogMaxSizeMB, LogMaxBackups and LogMaxAgeDays, and on SIGUSR1); ""
	// sends them where LogFile's lines go.
	AccessLogFile string
	// AccessLogFormat is the access lines' form: "json" or "combined"
	// (nginx's combined format followed by relay's fields).
	AccessLogFormat string
	// RequestID gives every request an X-Request-Id, kept from a trusted
	// proxy or made by relay, sent to the backend and back to the client
	// and written in the access log.
	RequestID bool
	// ClientHeaderTimeout bounds how long a client may take to send a whole
	// request head.
	ClientHeaderTimeout time.Duration
	// IdleTimeout closes keep-alive client connections idle for longer.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may run after a stop
	// signal; 0 closes at once.
	ShutdownTimeout time.Duration
	// TunnelIdleTimeout closes a tunnel (WebSocket) in which neither side
	// sent anything for longer.
	TunnelIdleTimeout time.Duration
	// MaxConnections caps concurrent client connections.
	MaxConnections int
	// Workers sets GOMAXPROCS, the scheduler threads of each serving
	// process; 0 uses all cores, shared among the processes.
	Workers int
	// Processes is how many serving processes share the listen address,
	// like nginx's worker_processes; 0 starts one per core. With more than
	// one, the first process supervises the others and serves nothing.
	Processes int
	// CPUAffinity binds each serving process to one core and has the
	// kernel hand it the connections whose packets arrive on that core.
	// It needs more than one process.
	CPUAffinity bool
	// MaxHeaderBytes caps a request head; larger ones get 431.
	MaxHeaderBytes int
	// MaxBodyBytes caps a request body; 0 means no cap.
	MaxBodyBytes int64
	// CompressMemoryMB bounds the memory of the compression encoders in
	// use in each serving process, in MiB; 0 takes compress's default
	// (256 MiB, or a quarter of GOMEMLIMIT).
	CompressMemoryMB int `reload:"live"`
	// BodyBufferBytes is the longest Content-Length whose body relay reads
	// whole before picking a backend.
	BodyBufferBytes int64
	// ClientBodyTimeout bounds the time a client takes to send a request
	// body, extended by a second for every ClientBodyMinRate bytes it sent.
	ClientBodyTimeout time.Duration
	ClientBodyMinRate int
	// AdminListen is the HOST:PORT of the admin listener (metrics, admin
	// API, dashboard, profiler); "" turns it off. It never carries client
	// traffic.
	AdminListen string
	// AdminToken, when set, is the bearer token every admin request must
	// carry; it is required when AdminListen is reachable beyond loopback.
	AdminToken string
	// AdminAllowedHosts are the Host header values, besides the admin
	// listener's own address, that the admin listener answers: HOST (any
	// port) or HOST:PORT, in the form ParseAllowedHost returns. Requests
	// naming any other host are refused, so that a web page cannot reach
	// the admin API through DNS rebinding. None by default.
	AdminAllowedHosts []string

	// listenSet records that Listen was given explicitly (file or flag), so
	// it is no longer derived from Port.
	listenSet bool
	// lines maps a top-level YAML key to the line it was set on.
	lines map[string]int
	// flags maps a top-level YAML key to the flag that overrode it.
	flags map[string]string
	// undecoded holds keys whose value could not be read; checks relating
	// them to other keys are skipped instead of judging the default.
	undecoded map[string]bool
}

// Options says what validation accepts beyond the package's own rules.
type Options struct {
	// Algorithms lists the accepted algorithm names, aliases included. When
	// it is empty any non-empty name is accepted.
	Algorithms []string
	// IgnoringWeights lists the algorithm names, aliases included, that
	// give every backend the same share whatever its weight; Warnings
	// names weights set for nothing under them.
	IgnoringWeights []string
	// Hashing lists the algorithm names, aliases included, that hash a
	// key; Warnings names hash_key and hash_balance_factor set for a
	// pool whose algorithm is not one of them. When it is empty nothing
	// is said.
	Hashing []string
}

// Default returns a configuration holding every default and no backends; it
// does not validate until backends are added.
func Default() *Config {
	return &Config{
		Pool:                defaultPool(),
		Listen:              ":" + strconv.Itoa(DefaultPort),
		Port:                DefaultPort,
		TLSMinVersion:       DefaultTLSMinVersion,
		LogMaxSizeMB:        DefaultLogMaxSizeMB,
		LogMaxBackups:       DefaultLogMaxBackups,
		LogMaxAgeDays:       DefaultLogMaxAgeDays,
		LogLevel:            DefaultLogLevel,
		AccessLog:           DefaultAccessLog,
		AccessLogFormat:     DefaultAccessLogFormat,
		RequestID:           DefaultRequestID,
		ClientHeaderTimeout: DefaultClientHeaderTimeout,
		IdleTimeout:         DefaultIdleTimeout,
		ShutdownTimeout:     DefaultShutdownTimeout,
		TunnelIdleTimeout:   DefaultTunnelIdleTimeout,
		MaxConnections:      DefaultMaxConnections,
		Workers:             DefaultWorkers,
		Processes:           DefaultProcesses,
		MaxHeaderBytes:      DefaultMaxHeaderBytes,
		MaxBodyBytes:        DefaultMaxBodyBytes,
		BodyBufferBytes:     DefaultBodyBufferBytes,
		ClientBodyTimeout:   DefaultClientBodyTimeout,
		ClientBodyMinRate:   DefaultClientBodyMinRate,
		AdminListen:         DefaultAdminListen,
		EscapedSlashes:      DefaultEscapedSlashes,
	}
}

// ServingProcesses is how many processes serve: Processes, or one per
// core when it is 0.
func (c *Config) ServingProcesses() int {
	if c.Processes == 0 {
		return runtime.NumCPU()
	}
	return c.Processes
}

// clone returns a copy that shares nothing mutable with c, so Apply can work
// on it and leave c untouched when the result is invalid.
func (c *Config) clone() *Config {
	n := *c
	n.Pool = c.Pool.clone()
	n.PoolNames = append([]string(nil), c.PoolNames...)
	n.Routes = append([]Route(nil), c.Routes...)
	if c.Pools != nil {
		n.Pools = make(map[string]*Pool, len(c.Pools))
		for name, p := range c.Pools {
			q := p.clone()
			n.Pools[name] = &q
		}
	}
	n.TrustedProxies = append([]netip.Prefix(nil), c.TrustedProxies...)
	n.AdminAllowedHosts = append([]string(nil), c.AdminAllowedHosts...)
	n.lines = make(map[string]int, len(c.lines))
	for k, v := range c.lines {
		n.lines[k] = v
	}
	n.flags = make(map[string]string, len(c.flags))
	for k, v := range c.flags {
		n.flags[k] = v
	}
	n.undecoded = make(map[string]bool, len(c.undecoded))
	for k, v := range c.undecoded {
		n.undecoded[k] = v
	}
	return &n
}
