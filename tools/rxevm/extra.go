package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/pureverbs/pureverbs/tools/rxevm/internal/vm"
)

// envExtra lists programs of the user's to put in the image.
const envExtra = "RXEVM_EXTRA"

// parseExtra reads a list of programs for the image, "HOST[:GUEST],...":
// each host file is placed at GUEST, or at /usr/local/bin/<its name>. Each
// must be an ELF executable for the guest's architecture and should be
// static (the image has only the C runtime rdma-core's tools need).
func parseExtra(spec string, arch vm.Arch) (map[string]string, error) {
	files := map[string]string{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		host, guest, ok := strings.Cut(item, ":")
		if !ok {
			guest = "/usr/local/bin/" + filepath.Base(host)
		}
		if !path.IsAbs(guest) || path.Clean(guest) == "/" {
			return nil, fmt.Errorf("rxevm: %s: %q: the guest path must be absolute", envExtra, item)
		}
		abs, err := filepath.Abs(host)
		if err != nil {
			return nil, fmt.Errorf("rxevm: %s: %w", envExtra, err)
		}
		f, err := elf.Open(abs)
		if err != nil {
			return nil, fmt.Errorf("rxevm: %s: %s: %w", envExtra, host, err)
		}
		machine := f.Machine
		f.Close()
		if machine != arch.Machine {
			return nil, fmt.Errorf("rxevm: %s: %s is built for %v, the guest is %s", envExtra, host, machine, arch.GOARCH)
		}
		if static, _ := vm.IsStatic(abs); !static {
			fmt.Fprintf(os.Stderr, "rxevm: warning: %s is dynamically linked; build it with CGO_ENABLED=0\n", host)
		}
		if _, dup := files[path.Clean(guest)]; dup {
			return nil, fmt.Errorf("rxevm: %s: two programs for %s", envExtra, guest)
		}
		files[path.Clean(guest)] = abs
	}
	return files, nil
}
