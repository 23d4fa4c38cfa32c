package config

import (
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// LiveKeys are the settings a reload applies while relay serves: the
// pools (backends and every pool setting but the health checks), the
// routes, the certificates, the log level and acme.domains. Every other
// setting takes effect when relay restarts. The tag reload:"live" on a
// field of Config or Pool declares it, and on a field of a split section
// (below) its key inside the section (acme.domains); this list is
// derived from the tags, in the order of settingKeys.
var LiveKeys = liveKeys()

func liveKeys() []string {
	live := map[string]bool{}
	walkSettings(reflect.TypeOf(Config{}), "", false, nil, func(key string, l bool, index []int) {
		live[key] = live[key] || l
		f := reflect.TypeOf(Config{}).FieldByIndex(index)
		for _, sub := range sectionFields(f.Type) {
			live[key+"."+sub.key] = live[key+"."+sub.key] || l || sub.live
		}
	})
	var keys []string
	for _, k := range settingKeys() {
		if live[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// A split section is a section (a pointer to a struct of this package)
// some of whose fields are tagged reload:"live": a reload applies those
// and not the others, so a change inside it is named by the key inside
// the section (acme.email, acme.domains) rather than by the section's.
// Turning the section on or off is a change of the section's own key.

// sectionField is one field of a split section: its key inside the
// section, whether a reload applies it, and its index.
type sectionField struct {
	key   string
	live  bool
	index int
}

// sectionFields are the fields of split section type t, in their order;
// none when t is not a split section.
func sectionFields(t reflect.Type) []sectionField {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct || t.Elem().PkgPath() != reflect.TypeOf(Config{}).PkgPath() {
		return nil
	}
	t = t.Elem()
	var fs []sectionField
	split := false
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "Line" {
			continue
		}
		live := f.Tag.Get("reload") == "live"
		split = split || live
		key := f.Tag.Get("key")
		if key == "" {
			key = snake(f.Name)
		}
		fs = append(fs, sectionField{key: key, live: live, index: i})
	}
	if !split {
		return nil
	}
	return fs
}

// settingKeys are Keys with, after each split section's key, the keys
// inside it as section.key: the order RestartOnly, Changed and LiveKeys
// follow.
func settingKeys() []string {
	subs := map[string][]string{}
	walkSettings(reflect.TypeOf(Config{}), "", false, nil, func(key string, _ bool, index []int) {
		for _, sub := range sectionFields(reflect.TypeOf(Config{}).FieldByIndex(index).Type) {
			subs[key] = append(subs[key], key+"."+sub.key)
		}
	})
	var keys []string
	for _, k := range Keys() {
		keys = append(keys, k)
		keys = append(keys, subs[k]...)
	}
	return keys
}

// RestartOnly lists the keys, in the order examples/config.yml shows
// them, whose values differ between the configuration relay runs and a
// reloaded one but that a reload does not apply, so the log can name
// them instead of ignoring them silently.
func RestartOnly(running, next *Config) []string {
	return changedKeys(running, next, func(k string) bool { return !slices.Contains(LiveKeys, k) })
}

// Changed lists the keys, in the order examples/config.yml shows them,
// whose values differ between two configurations, backends left out: the
// reload line names the backends that changed one by one.
func Changed(before, after *Config) []string {
	return changedKeys(before, after, func(k string) bool { return k != "backends" })
}

// changedKeys lists the keys, in the order examples/config.yml shows
// them, whose values differ between a and b and that keep accepts.
func changedKeys(a, b *Config, keep func(string) bool) []string {
	changed := map[string]bool{}
	diff(reflect.ValueOf(*a), reflect.ValueOf(*b), "", changed)
	var keys []string
	for _, k := range settingKeys() {
		if changed[k] && keep(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// diff marks the key of every setting that differs between a and b:
// inside a split section both have, the keys inside it that differ
// (acme.email); a split section one of them lacks, the section's key.
func diff(a, b reflect.Value, _ string, changed map[string]bool) {
	walkSettings(a.Type(), "", false, nil, func(key string, _ bool, index []int) {
		fa, fb := a.FieldByIndex(index), b.FieldByIndex(index)
		if subs := sectionFields(fa.Type()); subs != nil && !fa.IsNil() && !fb.IsNil() {
			for _, sub := range subs {
				if !sameSetting(fa.Elem().Field(sub.index), fb.Elem().Field(sub.index)) {
					changed[key+"."+sub.key] = true
				}
			}
			return
		}
		if !sameSetting(fa, fb) {
			changed[key] = true
		}
	})
}

// walkSettings calls visit for each exported field of struct type t that
// holds a setting, with its key, whether a reload applies it, and its
// index in t. A field's key is its tag key:"..." or its name in
// snake_case after prefix; an embedded struct's fields (Config's Pool)
// are keys of the same level, and a nested struct that is no key of its
// own (HealthCheck) lends its name as a prefix to its fields'
// (health_check_interval). A field tagged reload:"live" is applied by
// reload, and so is everything inside it.
func walkSettings(t reflect.Type, prefix string, live bool, index []int, visit func(key string, live bool, index []int)) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "Path" && prefix == "" {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		l := live || f.Tag.Get("reload") == "live"
		if f.Anonymous {
			walkSettings(f.Type, prefix, l, idx, visit)
			continue
		}
		key := f.Tag.Get("key")
		if key == "" {
			key = prefix + snake(f.Name)
		}
		if flattened(t, f, key) {
			walkSettings(f.Type, key+"_", l, idx, visit)
			continue
		}
		visit(key, l, idx)
	}
}

// sameSetting reports whether two values of a setting are the same,
// wherever in the file they stand: the exported fields other than Line
// are compared, so certificates, backends, pools and routes moved to
// other lines are the same.
func sameSetting(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameSetting(a.Elem(), b.Elem())
	case reflect.Struct:
		if !a.CanInterface() || a.Type().PkgPath() != "relay/internal/config" {
			return reflect.DeepEqual(a.Interface(), b.Interface())
		}
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() || f.Name == "Line" {
				continue
			}
			if !sameSetting(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameSetting(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !sameSetting(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// snake turns a Go field name into its YAML key: MaxIdleConnsPerBackend
// is max_idle_conns_per_backend, CPUAffinity cpu_affinity.
func snake(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// flattened reports whether field f of t is a struct whose fields are
// top-level keys of their own (HealthCheck's health_check_interval, ...)
// rather than a section read under one key (discovery).
func flattened(t reflect.Type, f reflect.StructField, key string) bool {
	return f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() && !slices.Contains(Keys(), key)
}
