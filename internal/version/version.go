// Package version says which relay this is: the version, the commit and
// the time it was built or committed, and the Go that built it.
//
// A release build (build/release.sh) sets them with the linker:
//
//	go build -ldflags "-X relay/internal/version.version=v1.2.3 \
//	    -X relay/internal/version.commit=$(git rev-parse HEAD) \
//	    -X relay/internal/version.date=2026-11-26T16:00:00Z" ./cmd/relay
//
// Without them relay reads what Go stamps into every binary built in a
// checkout (runtime/debug.ReadBuildInfo: the main module's version,
// vcs.revision, vcs.time, vcs.modified), and says "devel" or "unknown"
// for what neither gives.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Set by the linker (-X) in a release build; empty otherwise.
var (
	version string
	commit  string
	date    string
)

// Info is a build of relay.
type Info struct {
	// Version is the release ("v1.2.3"), the module version Go derived
	// from the checkout's tags ("v0.0.0-20261126160000-abcdef123456+dirty"),
	// or "devel".
	Version string
	// Commit is the full revision built, or "unknown".
	Commit string
	// Dirty is true when Go stamped the checkout as having changes that
	// were not committed (vcs.modified); a release build's version says
	// so itself (git describe --dirty).
	Dirty bool
	// Built is when a release build ran (RFC 3339), or "".
	Built string
	// Committed is the commit's time (vcs.time) when Built is not known,
	// or "".
	Committed string
	// Go is the Go version that built relay, and Platform its GOOS/GOARCH.
	Go, Platform string
}

// Get returns this binary's build, read once.
var Get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(version, commit, date, bi)
})

// read makes the Info from the linker's values, which win, and the build
// information Go stamped (bi may be nil).
func read(ldVersion, ldCommit, ldDate string, bi *debug.BuildInfo) Info {
	i := Info{Version: ldVersion, Commit: ldCommit, Built: ldDate, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.Go = bi.GoVersion
		}
		vcs := map[string]string{}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
		if i.Commit == "" {
			// The stamped time and state belong to the stamped
			// commit; with another commit set by hand they would not.
			i.Commit = vcs["vcs.revision"]
			if i.Commit != "" {
				i.Dirty = vcs["vcs.modified"] == "true"
				if i.Built == "" {
					i.Committed = vcs["vcs.time"]
				}
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// ShortCommit is the commit's first 12 hex digits, as git and Go's
// pseudo-versions abbreviate it, or "unknown".
func (i Info) ShortCommit() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String is the line relay -version prints:
//
//	relay v1.2.3 (commit 0123456789ab, built 2026-11-26T16:00:00Z, go1.26.8 linux/amd64)
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "relay %s (commit %s", i.Version, i.ShortCommit())
	if i.Dirty {
		b.WriteString(", dirty")
	}
	switch {
	case i.Built != "":
		fmt.Fprintf(&b, ", built %s", i.Built)
	case i.Committed != "":
		fmt.Fprintf(&b, ", committed %s", i.Committed)
	}
	fmt.Fprintf(&b, ", %s %s)", i.Go, i.Platform)
	return b.String()
}
