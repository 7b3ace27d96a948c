// Package streamperf is what librdmacm's rstream and riostream examples
// share, for the Go tools of the same names: their command line, their
// test plan (the default latency and bandwidth runs or one custom run),
// the 16-byte sync, the byte pattern -T v checks and the result table.
package streamperf

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/tools/internal/getopt"
)

// Tool names one of the two programs; their options differ slightly.
type Tool struct {
	Name string // "rstream" or "riostream"
	// Sockets: rstream's -k, -T s (TCP), -T f (fork) and -T r (resolve
	// through rdma_getaddrinfo); riostream has none of them.
	Sockets bool
}

// The tools' defaults (rstream.c and riostream.c, the same in rdma-core 44
// and 56).
const (
	DefaultPort   = "7471"
	defaultInline = 64
	defaultSize   = 1000
	defaultCount  = 1000
	// DefaultBuffer is the SO_SNDBUF/SO_RCVBUF value the tools set when
	// -B is not given.
	DefaultBuffer = 1 << 19
)

// Options is a parsed command line.
type Options struct {
	Server string // -s: the server to connect to; "" means be the server
	Bind   string // -b: the local address (the server listens on it)
	// NumericHost: -f ip or -f ipv6, addresses are not looked up by name.
	NumericHost bool
	Buffer      int // -B: socket buffer sizes; 0 means DefaultBuffer
	Inline      int // -i: inline size of the latency tests
	Iterations  int // -I
	Count       int // -C: transfers per iteration
	Size        int // -S: bytes per transfer
	// Custom is set by -I, -C or -S <n>: one test of those values instead
	// of the default latency and bandwidth runs.
	Custom bool
	// AllSizes is -S all: the default runs include the intermediate sizes.
	AllSizes  bool
	Port      string // -p
	Keepalive int    // -k: keepalive idle time in seconds, 0 off (rstream only)

	TCP      bool // -T s or -T f: plain TCP sockets instead of rsockets
	Async    bool // -T a: poll before each call
	DontWait bool // non-blocking calls: the default, -T n
	WaitAll  bool // -T b: blocking calls with MSG_WAITALL
	Resolve  bool // -T r
	Verify   bool // -T v: check the byte pattern of all data received
}

// ErrUsage is returned for a command line the C tools answer with their
// usage text and exit status 1; the text goes to stdout, as theirs does.
var ErrUsage = errors.New("usage")

func (t Tool) specs() []getopt.Spec {
	letters := "sbfBiICSpT"
	if t.Sockets {
		letters = "sbfBiICSpkT"
	}
	var specs []getopt.Spec
	for _, c := range letters {
		specs = append(specs, getopt.Spec{Short: c, Arg: true})
	}
	return specs
}

// Parse reads args (without the program name) as the C tool's getopt loop
// does. Operands are ignored, as theirs are. A getopt error is written to
// stderr worded like glibc's ("rstream: invalid option -- 'x'"), then the
// usage to stdout, and ErrUsage returned; so are unknown -T options. An
// unknown -f format is only warned about on stderr.
func (t Tool) Parse(args []string, stdout, stderr io.Writer) (*Options, error) {
	o := &Options{Inline: defaultInline, Iterations: 1, Count: defaultCount, Size: defaultSize,
		Port: DefaultPort, DontWait: true}
	vals, _, err := getopt.Parse(t.specs(), args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", t.Name, err)
		t.Usage(stdout)
		return nil, ErrUsage
	}
	for _, v := range vals {
		switch v.Short {
		case 's':
			o.Server = v.Arg
		case 'b':
			o.Bind = v.Arg
		case 'f':
			switch {
			case prefixFold(v.Arg, "ip"):
				o.NumericHost = true
			case prefixFold(v.Arg, "gid"):
				return nil, fmt.Errorf("-f %s: AF_IB addresses are not supported", v.Arg)
			default:
				fmt.Fprintln(stderr, "Warning: unknown address format")
			}
		case 'B':
			o.Buffer = Atoi(v.Arg)
		case 'i':
			o.Inline = Atoi(v.Arg)
		case 'I':
			o.Custom, o.Iterations = true, Atoi(v.Arg)
		case 'C':
			o.Custom, o.Count = true, Atoi(v.Arg)
		case 'S':
			if prefixFold(v.Arg, "all") {
				o.AllSizes = true
			} else {
				o.Custom, o.Size = true, Atoi(v.Arg)
			}
		case 'p':
			o.Port = v.Arg
		case 'k':
			o.Keepalive = Atoi(v.Arg)
		case 'T':
			if !t.testOption(o, v.Arg) {
				t.Usage(stdout)
				return nil, ErrUsage
			}
		}
	}
	return o, nil
}

// testOption applies one -T argument: a single letter, or a word matched
// on its leading letters as the C tools' strncasecmp calls match it.
func (t Tool) testOption(o *Options, arg string) bool {
	word := map[byte]string{'s': "socket", 'a': "async", 'b': "block", 'f': "fork", 'n': "nonblock", 'r': "resolve", 'v': "verify"}
	var c byte
	if len(arg) == 1 {
		c = arg[0]
		if _, ok := word[c]; !ok {
			return false
		}
	} else {
		// The C tools test the words in this order.
		for _, k := range []byte("sabnrvf") {
			if prefixFold(arg, word[k]) {
				c = k
				break
			}
		}
	}
	switch c {
	case 'a':
		o.Async = true
	case 'b':
		o.DontWait, o.WaitAll = false, true
	case 'n':
		o.DontWait = true
	case 'v':
		o.Verify = true
	case 's', 'f', 'r':
		if !t.Sockets {
			return false
		}
		if c == 'r' {
			o.Resolve = true
		} else {
			o.TCP = true // fork (-T f) runs the test without forking; its output is the same
		}
	default:
		return false
	}
	return true
}

// prefixFold reports whether s begins with word, ignoring ASCII case: C's
// strncasecmp(word, s, len(word)) == 0.
func prefixFold(s, word string) bool {
	return len(s) >= len(word) && strings.EqualFold(s[:len(word)], word)
}

// Usage writes the C tool's usage text.
func (t Tool) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", t.Name)
	lines := []string{"[-s server_address]", "[-b bind_address]", "[-f address_format]", "    name, ip, ipv6, or gid",
		"[-B buffer_size]", "[-i inline_size]", "[-I iterations]", "[-C transfer_count]", "[-S transfer_size or all]",
		"[-p port_number]"}
	if t.Sockets {
		lines = append(lines, "[-k keepalive_time]")
	}
	lines = append(lines, "[-T test_option]")
	if t.Sockets {
		lines = append(lines, "    s|sockets - use standard tcp/ip sockets")
	}
	lines = append(lines, "    a|async - asynchronous operation (use poll)", "    b|blocking - use blocking calls")
	if t.Sockets {
		lines = append(lines, "    f|fork - fork server processing")
	}
	lines = append(lines, "    n|nonblocking - use nonblocking calls")
	if t.Sockets {
		lines = append(lines, "    r|resolve - use rdma cm to resolve address")
	}
	lines = append(lines, "    v|verify - verify data")
	for _, l := range lines {
		fmt.Fprintf(w, "\t%s\n", l)
	}
}

// Atoi reads a number as C's atoi does: leading blanks, a sign and the
// digits that follow; anything else ends it, and no digits are 0. Values
// beyond an int32 wrap as glibc's (long to int) conversion does.
func Atoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	end := 0
	if end < len(s) && (s[end] == '-' || s[end] == '+') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(s[:end], 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			if strings.HasPrefix(s, "-") {
				n = -1 << 63
			} else {
				n = 1<<63 - 1
			}
		} else {
			return 0
		}
	}
	return int(int32(n))
}
