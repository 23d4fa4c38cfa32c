package config

import (
	"reflect"
	"slices"
	"testing"
)

// TestEveryFieldHasItsKey keeps RestartOnly honest: each exported field of
// Config maps to a key relay reads, so a changed setting is always named.
func TestEveryFieldHasItsKey(t *testing.T) {
	keys := Keys()
	var walk func(rt reflect.Type, prefix string)
	walk = func(rt reflect.Type, prefix string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if !f.IsExported() || f.Name == "Path" && prefix == "" {
				continue
			}
			if flattened(rt, f, prefix+snake(f.Name)) {
				walk(f.Type, prefix+snake(f.Name)+"_")
				continue
			}
			if k := prefix + snake(f.Name); !slices.Contains(keys, k) {
				t.Errorf("field %s maps to %q, which is not a key", f.Name, k)
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

func TestRestartOnlyNamesChangedSettings(t *testing.T) {
	a := mustParse(t, y("listen: 127.0.0.1:8080", "processes: 1", "backends:", "  - http://127.0.0.1:8001"))
	b := mustParse(t, y("listen: 127.0.0.1:9090", "processes: 2", "health_check_interval: 3s",
		"backends:", "  - http://127.0.0.1:8001", "  - http://127.0.0.1:8002"))
	got := RestartOnly(a, b)
	want := []string{"listen", "health_check_interval", "processes"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RestartOnly = %v, want %v (backends apply live)", got, want)
	}
	if got := RestartOnly(a, a); len(got) != 0 {
		t.Fatalf("RestartOnly of the same configuration = %v, want none", got)
	}
}
