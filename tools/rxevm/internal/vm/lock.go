package vm

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock takes the cache's lock (flock on <cache>/.lock), waiting for another
// run that holds it, and returns the function that releases it. Downloads,
// unpacking, depmod and the kernel choice happen under it; booting does
// not, since every run builds its image in a directory of its own. The
// kernel drops the lock when the process dies, so an interrupted run never
// leaves the cache locked.
func (c *Cache) Lock() (unlock func(), err error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("rxevm: cache: %w", err)
	}
	path := filepath.Join(c.Dir, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rxevm: cache lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == unix.EWOULDBLOCK {
		if c.Log != nil {
			fmt.Fprintf(c.Log, "rxevm: waiting for another run's lock on %s\n", path)
		}
		err = flockRetry(f)
		if err != nil {
			f.Close()
			return nil, err
		}
	} else if err != nil {
		f.Close()
		return nil, fmt.Errorf("rxevm: flock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func flockRetry(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("rxevm: flock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it over path, so a reader sees the old contents or the new, never part.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("rxevm: write %s: %w", path, err)
	}
	return nil
}
