package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func stamped(version string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "relay", Version: version}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

const rev = "0123456789abcdef0123456789abcdef01234567"

func TestRead(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		name                string
		ldVersion, ldCommit string
		ldDate              string
		bi                  *debug.BuildInfo
		want                string
	}{
		{
			name:      "release build",
			ldVersion: "v1.2.3", ldCommit: rev, ldDate: "2026-11-26T16:00:00Z",
			bi:   stamped("(devel)", "vcs.revision", "ffffffffffff", "vcs.modified", "true"),
			want: "relay v1.2.3 (commit 0123456789ab, built 2026-11-26T16:00:00Z, go1.26.8 " + platform + ")",
		},
		{
			name: "checkout, committed",
			bi:   stamped("v0.0.0-20261126160000-0123456789ab", "vcs.revision", rev, "vcs.time", "2026-11-26T16:00:00Z", "vcs.modified", "false"),
			want: "relay v0.0.0-20261126160000-0123456789ab (commit 0123456789ab, committed 2026-11-26T16:00:00Z, go1.26.8 " + platform + ")",
		},
		{
			name: "checkout with changes",
			bi:   stamped("v0.0.0-20261126160000-0123456789ab+dirty", "vcs.revision", rev, "vcs.time", "2026-11-26T16:00:00Z", "vcs.modified", "true"),
			want: "relay v0.0.0-20261126160000-0123456789ab+dirty (commit 0123456789ab, dirty, committed 2026-11-26T16:00:00Z, go1.26.8 " + platform + ")",
		},
		{
			name: "no VCS stamp (-buildvcs=false, or outside a checkout)",
			bi:   stamped("(devel)"),
			want: "relay devel (commit unknown, go1.26.8 " + platform + ")",
		},
		{
			name:      "version set by hand, commit from the stamp",
			ldVersion: "v1.2.3",
			bi:        stamped("(devel)", "vcs.revision", rev, "vcs.time", "2026-11-26T16:00:00Z"),
			want:      "relay v1.2.3 (commit 0123456789ab, committed 2026-11-26T16:00:00Z, go1.26.8 " + platform + ")",
		},
		{
			name: "no build information",
			want: "relay devel (commit unknown, " + runtime.Version() + " " + platform + ")",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := read(c.ldVersion, c.ldCommit, c.ldDate, c.bi).String(); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestGet reads this test binary's own build: whatever it holds, the line
// names relay, a version and the Go that built it.
func TestGet(t *testing.T) {
	i := Get()
	if i.Version == "" || i.Commit == "" || i.Go != runtime.Version() {
		t.Errorf("Get() = %+v", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "relay ") || !strings.Contains(s, runtime.Version()) || strings.Contains(s, "\n") {
		t.Errorf("String() = %q", s)
	}
}
