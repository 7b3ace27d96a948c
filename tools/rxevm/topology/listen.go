package topology

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Listening reports whether a TCP socket in this network namespace listens
// on port, on any address. It reads /proc/net/tcp and tcp6 instead of
// connecting: the servers waited for here (QEMU's socket netdev, the
// pingpong tools) take the first connection as their peer.
func Listening(port int) (bool, error) {
	want := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(file)
		if os.IsNotExist(err) {
			continue // no IPv6
		}
		if err != nil {
			return false, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...; st 0A is LISTEN.
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				f.Close()
				return true, nil
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return false, err
		}
	}
	return false, nil
}
