package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// sysfsRoot is where the kernel lists RDMA devices (a variable for tests).
var sysfsRoot = "/sys/class/infiniband"

// HWCounters reads the device port's hardware counters from sysfs
// (rdma_rxe's: sent_pkts, rcvd_pkts, send_rnr_err, rcvd_seq_err, ...).
func (s *Server) HWCounters() (map[string]uint64, error) {
	return readHWCounters(s.cfg.Device, s.cfg.Port)
}

func readHWCounters(dev string, port uint8) (map[string]uint64, error) {
	dir := filepath.Join(sysfsRoot, dev, "ports", strconv.Itoa(int(port)), "hw_counters")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("server: hw counters of %s port %d: %w", dev, port, err)
	}
	out := make(map[string]uint64, len(ents))
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("server: hw counter %s: %w", e.Name(), err)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			continue // not a number (e.g. lifespan): not a counter
		}
		out[e.Name()] = n
	}
	return out, nil
}
