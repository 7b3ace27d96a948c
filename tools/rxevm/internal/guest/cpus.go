package guest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

const cpuDir = "/sys/devices/system/cpu"

// onlineCPUs brings every present CPU online. Under a fixed -icount shift
// the kernel cannot start a second CPU at boot (the host boots it with
// maxcpus=1), but starts it from here in a few milliseconds of guest time.
func onlineCPUs() error {
	present, err := readCPUList(cpuDir + "/present")
	if err != nil {
		return err
	}
	online, err := readCPUList(cpuDir + "/online")
	if err != nil {
		return err
	}
	for _, c := range present {
		if slices.Contains(online, c) {
			continue
		}
		if err := os.WriteFile(fmt.Sprintf("%s/cpu%d/online", cpuDir, c), []byte("1"), 0); err != nil {
			return fmt.Errorf("bring CPU %d online: %w", c, err)
		}
	}
	return nil
}

func readCPUList(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cpus, err := parseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cpus, nil
}

// maxCPUs bounds a parsed list, so that a corrupt range cannot make it
// allocate without limit (the kernel's own limit, NR_CPUS, is 8192 on
// Debian).
const maxCPUs = 8192

// parseCPUList reads the kernel's CPU list format: "0-3,5,7-8", with a
// trailing newline; an empty list is no CPUs.
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: bad entry %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		if b >= maxCPUs || len(cpus)+b-a+1 > maxCPUs {
			return nil, fmt.Errorf("CPU list %q: more than %d CPUs", s, maxCPUs)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
