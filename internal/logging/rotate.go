package logging

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// backupTime is the time in a rotated file's name, in UTC, as Open's
// rotation writes it: lb.log becomes lb-2006-01-02T15-04-05.000.log.
const backupTime = "2006-01-02T15-04-05.000"

// backupName is the name path is moved to by a rotation at t.
func backupName(path string, t time.Time) string {
	ext := filepath.Ext(path)
	return path[:len(path)-len(ext)] + "-" + t.UTC().Format(backupTime) + ext
}

// moveAside renames path to its backup name for the first millisecond
// from now, and after the one last used, whose name is free, so one
// rotation never replaces the backup of another and names follow the
// order of the rotations. It returns the time named; a missing path is
// left missing.
func moveAside(path string, now, last time.Time) (time.Time, error) {
	t := now.Truncate(time.Millisecond)
	if !t.After(last) {
		t = last.Add(time.Millisecond)
	}
	for ; ; t = t.Add(time.Millisecond) {
		name := backupName(path, t)
		_, err := os.Lstat(name)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return last, err
		}
		if err := os.Rename(path, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return last, err
		}
		return t, nil
	}
}

// backup is one rotated file of a log and when it was rotated.
type backup struct {
	name string
	at   time.Time
}

// backups lists the rotated files of path, newest first.
func backups(path string) ([]backup, error) {
	dir, base := filepath.Split(path)
	ext := filepath.Ext(base)
	prefix := base[:len(base)-len(ext)] + "-"
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil, err
	}
	var bs []backup
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasPrefix(n, prefix) || !strings.HasSuffix(n, ext) || len(n) < len(prefix)+len(ext) {
			continue
		}
		at, err := time.Parse(backupTime, n[len(prefix):len(n)-len(ext)])
		if err != nil {
			continue // not a rotation's name
		}
		bs = append(bs, backup{name: filepath.Join(dir, n), at: at})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].at.After(bs[j].at) })
	return bs, nil
}

// prune removes rotated files of path beyond the newest maxBackups and
// those rotated more than maxAgeDays ago; 0 means no limit for either.
func prune(path string, maxBackups, maxAgeDays int, now time.Time) error {
	if maxBackups == 0 && maxAgeDays == 0 {
		return nil
	}
	bs, err := backups(path)
	if err != nil {
		return fmt.Errorf("log file %q: pruning: %w", path, err)
	}
	cutoff := now.Add(-time.Duration(maxAgeDays) * 24 * time.Hour)
	var errs []error
	for i, b := range bs {
		if (maxBackups > 0 && i >= maxBackups) || (maxAgeDays > 0 && b.at.Before(cutoff)) {
			if err := os.Remove(b.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("log file %q: pruning: %w", path, err)
	}
	return nil
}
