package config

import (
	"reflect"
	"testing"
)

// TestChangedNamesEverySettingButBackends: Changed names the keys whose
// values differ, live or not, in the order of the example file, and
// leaves the backends to the reload line's own lists.
func TestChangedNamesEverySettingButBackends(t *testing.T) {
	a := mustParse(t, y("listen: 127.0.0.1:8080", "retries: 2", "backends:", "  - http://127.0.0.1:8001"))
	b := mustParse(t, y("listen: 127.0.0.1:9090", "algorithm: p2c", "retries: 1", "log_level: debug",
		"backends:", "  - url: http://127.0.0.1:8001", "    weight: 3", "  - http://127.0.0.1:8002"))
	if got, want := Changed(a, b), []string{"listen", "algorithm", "log_level", "retries"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
	if got := Changed(a, a); len(got) != 0 {
		t.Fatalf("Changed of the same configuration = %v, want none", got)
	}
}
