// Package vm is the host side of the rdma_rxe test harness: it fetches and
// caches a Debian kernel that ships rdma_rxe, writes an initramfs holding only
// the modules, tools and test binaries a run needs, boots it under QEMU and
// carries the guest's exit status back out.
//
// QEMU's own exit status says nothing about the tests, so the guest's /init
// (package guest) prints a result marker on a dedicated serial port; a
// run without that marker is a failure, whatever QEMU returned.
package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// PlanPath is where the guest finds the Plan inside the initramfs.
const PlanPath = "/rxevm/plan.json"

// Markers the guest prints on its output port. ExitMarker is followed by the
// status of the whole run; the host accepts no other evidence of success.
const (
	StartMarker = "RXEVM-START"
	ExitMarker  = "RXEVM-EXIT"
)

// Topology names a network layout the guest builds before running commands.
type Topology string

// The layouts measured to carry RC traffic on Debian's 6.1 kernel
// (see shared/docs/environment.md).
const (
	// TopologyVeth: rxe0 on veth0 (10.99.0.1/24) and rxe1 on veth1
	// (10.99.0.2/24) in one namespace. accept_local=1 on both ends stops the
	// kernel dropping ARP and RoCE frames from "its own" addresses.
	TopologyVeth Topology = "veth"
	// TopologyLoopback: one veth pair, rxe0 on veth0 only; both QPs live on
	// rxe0 and talk to its own GID.
	TopologyLoopback Topology = "loopback"
	// TopologyTwoVM boots two VMs whose virtio NICs are joined by a QEMU
	// socket netdev; each runs the same commands with RXEVM_ROLE=a or b and
	// RXEVM_PEER set to the other's address. The guests see "twovm-a" and
	// "twovm-b".
	TopologyTwoVM Topology = "twovm"
	// TopologyNone builds nothing: no veth pair, no rxe link (with
	// RXEVM_UNLOADED=rdma_rxe, a kernel as a minimal host finds it, with
	// rdma_rxe on disk but not loaded).
	TopologyNone Topology = "none"
)

// Command is one program the guest runs, with its output streamed to the
// host and its exit status folded into the run's.
type Command struct {
	Path    string   `json:"path"`
	Args    []string `json:"args,omitempty"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`
}

// Plan is everything the guest's /init needs to know.
type Plan struct {
	// Modules are absolute guest paths of kernel modules, in load order.
	Modules  []string  `json:"modules"`
	Topology Topology  `json:"topology"`
	Commands []Command `json:"commands"`
	// Env is added to every command's environment.
	Env []string `json:"env,omitempty"`
	// Output is the guest device the host reads results from (Arch.Output).
	Output string `json:"output,omitempty"`
}

// ReadPlan loads a Plan written by WritePlan.
func ReadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("rxevm: plan %s: %w", path, err)
	}
	return &p, nil
}

// Encode returns the Plan as the guest reads it.
func (p *Plan) Encode() ([]byte, error) { return json.MarshalIndent(p, "", "  ") }

// Duration is a time.Duration that reads and writes as a string such as
// "90s" in a Plan, so a plan file stays readable when dumped for debugging.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}
