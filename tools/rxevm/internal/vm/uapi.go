package vm

import (
	"os/exec"
	"path/filepath"
)

// UAPISuite is the Debian suite whose linux-libc-dev (Linux 6.12's uapi
// headers) the ABI pins of packages uverbs and rxe compile against: the
// machine's own headers may predate members the Go structs mirror (Debian
// 12's rdma_user_rxe.h has no wr.flush, its ib_uverbs_query_port_resp_ex no
// active_speed_ex).
const UAPISuite = "trixie"

// UAPIHeaders makes sure gcc and libc6-dev are installed (apt-get, when
// missing) and returns the include directory of UAPISuite's linux-libc-dev,
// unpacked into the cache once (no install on the host): what make unit
// sets PUREVERBS_UAPI_INCLUDE to.
func (c *Cache) UAPIHeaders() (string, error) {
	if err := c.ensureGCC(); err != nil {
		return "", err
	}
	unlock, err := c.Lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	apt, err := (&Cache{Dir: c.Dir, Suite: UAPISuite, Log: c.Log, exec: c.exec}).aptOptions()
	if err != nil {
		return "", err
	}
	if err := c.ensureLists(apt); err != nil {
		return "", err
	}
	dir := filepath.Join(c.Dir, "uapi", UAPISuite)
	if err := c.unpack(dir, apt, []string{"linux-libc-dev"}, nil); err != nil {
		return "", err
	}
	return filepath.Join(dir, "usr", "include"), nil
}

// ensureGCC installs gcc and the C library headers when gcc is missing.
func (c *Cache) ensureGCC() error {
	return c.ensureCompiler("gcc", []string{"gcc", "libc6-dev"})
}

// ensureCompiler installs pkgs with apt-get when the compiler cc is not on
// PATH.
func (c *Cache) ensureCompiler(cc string, pkgs []string) error {
	if _, err := exec.LookPath(cc); err == nil {
		return nil
	}
	return c.aptInstall(pkgs)
}
