//go:build integration

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// goDevinfo is tools/devinfo in the image.
const goDevinfo = "devinfo"

// devinfoRun is one run of ibv_devinfo or devinfo: its outputs and status.
type devinfoRun struct {
	stdout, stderr string
	status         int
}

// runDevinfo runs name with args under a 30 s deadline, keeping stdout and
// stderr apart, and returns them with the exit status (a timeout fails the
// test).
func runDevinfo(t *testing.T, name string, args ...string) devinfoRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: no answer in 30 s\n%s%s", name, strings.Join(args, " "), out.String(), errOut.String())
	}
	r := devinfoRun{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.status = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return r
}

// devinfoField is one line of ibv_devinfo's output as a field: its name,
// qualified by the device and port it belongs to (flag lines, which have
// no name of their own, take the name of the field they decode with "[]"
// appended), and its value.
type devinfoField struct {
	key, value string
}

// parseDevinfo splits an ibv_devinfo output into fields, in order. Empty
// lines are left out; the layout itself is compared separately.
func parseDevinfo(out string) []devinfoField {
	var (
		fields    []devinfoField
		hca, port string
		lastNamed string
	)
	for _, line := range strings.Split(out, "\n") {
		text := strings.Trim(line, "\t ")
		if text == "" {
			continue
		}
		name, value, named := strings.Cut(text, ":")
		value = strings.Trim(value, "\t ")
		// A value with a colon (a GUID, a GID) still has its name first;
		// flag lines ("MEM_WINDOW", "NO SUPPORT", "Unknown flags: 0x…")
		// sit at five tabs.
		flag := strings.HasPrefix(line, "\t\t\t\t\t") && !strings.HasPrefix(text, "GID[")
		switch {
		case flag:
			fields = append(fields, devinfoField{hca + port + lastNamed + "[]", text})
			continue
		case !named:
			fields = append(fields, devinfoField{hca + port + text, ""})
			continue
		}
		switch name {
		case "hca_id":
			hca, port = value+"/", ""
		case "port":
			port = "port" + value + "/"
		}
		lastNamed = name
		fields = append(fields, devinfoField{hca + port + name, value})
	}
	return fields
}

// compareDevinfo reports, field by field, where the Go output differs
// from the C one; then, if every field matches, the first line whose
// layout (tabs, empty lines) differs.
func compareDevinfo(t *testing.T, what string, c, goOut string) {
	t.Helper()
	cf, gf := parseDevinfo(c), parseDevinfo(goOut)
	cm := map[string][]string{}
	for _, f := range cf {
		cm[f.key] = append(cm[f.key], f.value)
	}
	gm := map[string][]string{}
	for _, f := range gf {
		gm[f.key] = append(gm[f.key], f.value)
	}
	bad := 0
	for _, f := range cf {
		if g, ok := gm[f.key]; !ok {
			t.Errorf("%s: field %s = %q in ibv_devinfo, missing from devinfo", what, f.key, f.value)
			bad++
		} else if c := cm[f.key]; strings.Join(g, "|") != strings.Join(c, "|") {
			t.Errorf("%s: field %s: ibv_devinfo %q, devinfo %q", what, f.key, strings.Join(c, "|"), strings.Join(g, "|"))
			bad++
			gm[f.key] = c // report each field once
		}
	}
	for _, f := range gf {
		if _, ok := cm[f.key]; !ok {
			t.Errorf("%s: field %s = %q in devinfo, not printed by ibv_devinfo", what, f.key, f.value)
			bad++
		}
	}
	if bad != 0 {
		t.Logf("%s: ibv_devinfo:\n%s\ndevinfo:\n%s", what, c, goOut)
		return
	}
	for i := range cf {
		if i >= len(gf) || cf[i].key != gf[i].key {
			t.Errorf("%s: field %d is %s in ibv_devinfo, %s in devinfo: the order differs", what, i, cf[i].key, gf[min(i, len(gf)-1)].key)
			return
		}
	}
	if c != goOut {
		cl, gl := strings.Split(c, "\n"), strings.Split(goOut, "\n")
		for i := range cl {
			if i >= len(gl) || cl[i] != gl[i] {
				g := "(end)"
				if i < len(gl) {
					g = fmt.Sprintf("%q", gl[i])
				}
				t.Errorf("%s: same fields, but line %d is %q in ibv_devinfo and %s in devinfo", what, i+1, cl[i], g)
				return
			}
		}
		t.Errorf("%s: devinfo prints more lines than ibv_devinfo", what)
	}
}

// tools/devinfo prints what rdma-core's ibv_devinfo prints, field by field,
// for every option combination ibv_devinfo has, on whatever kernel the VM
// boots (the C tool is the same VM's). Exit status and error messages
// match too.
func TestDevinfoMatchesIbvDevinfo(t *testing.T) {
	devs := devices(t, 2)
	for _, args := range [][]string{
		{"-v"},
		{},
		{"-d", devs[1], "-v"},
		{"-d", devs[0]},
		{"-d", devs[0], "-i", "1", "-v"},
		{"--ib-dev=" + devs[1], "--verbose", "--ib-port", "1"},
		{"-vd" + devs[0]},
		{"-i", "0x1"},
		{"-i", "257", "-v"}, // ibv_devinfo keeps the low 8 bits of the port: 1
		{"-l"},
		{"--list", "-v"},
	} {
		what := "devinfo " + strings.Join(args, " ")
		c := runDevinfo(t, "ibv_devinfo", args...)
		g := runDevinfo(t, goDevinfo, args...)
		if c.status != 0 || g.status != 0 {
			t.Errorf("%s: exit status %d (ibv_devinfo, stderr %q) and %d (devinfo, stderr %q), want 0", what, c.status, c.stderr, g.status, g.stderr)
			continue
		}
		compareDevinfo(t, what, c.stdout, g.stdout)
	}
	if t.Failed() {
		return
	}
	// The verbose output has the fields this test is about.
	full := parseDevinfo(runDevinfo(t, goDevinfo, "-v").stdout)
	want := map[string]string{
		devs[0] + "/port1/state": "PORT_ACTIVE (4)", devs[0] + "/port1/max_mtu": "4096 (5)",
		devs[0] + "/atomic_cap": "ATOMIC_HCA (1)", devs[0] + "/port1/GID[  1]": "::ffff:10.99.0.1, RoCE v2",
	}
	for _, f := range full {
		if w, ok := want[f.key]; ok && f.value == w {
			delete(want, f.key)
		}
	}
	if len(want) != 0 {
		t.Errorf("devinfo -v lacks %v", want)
	}
	t.Logf("devinfo -v: %d fields, all equal to ibv_devinfo's", len(full))

	// What the ioctl form of QUERY_PORT adds, as this kernel fills it.
	d, err := uverbs.DeviceByName(devs[0])
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := uverbs.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	p, err := ctx.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s port 1: active_speed %d, active_speed_ex %d, port_cap_flags2 %#x, init_type_reply %d",
		devs[0], p.ActiveSpeed, p.ActiveSpeedEx, p.PortCapFlags2, p.InitTypeReply)
}

// usageText normalizes a usage text for comparison: the program's name,
// and the one line rdma-core changed between v44 and v56 (the -d default,
// "first device found" then "all devices"; both tools show every device).
func usageText(s, prog string) string {
	s = strings.ReplaceAll(s, prog, "PROG")
	return strings.ReplaceAll(s, "(default first device found)", "(default all devices)")
}

// The failures: an unknown device, a port the device does not have, a port
// of 0, an unknown option. Status, and the message on stderr (usage on
// stdout, with the program's own name), are ibv_devinfo's.
func TestDevinfoErrorsMatchIbvDevinfo(t *testing.T) {
	devs := devices(t, 1)
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"-d", "nosuch0"}, 255},
		{[]string{"-d", devs[0], "-i", "2"}, 4},
		{[]string{"-i", "2"}, 4},
		{[]string{"-i", "0"}, 1},
		{[]string{"-i", "x"}, 1},
		{[]string{"-x"}, 255},
		{[]string{"--ib-dev"}, 255},
	} {
		what := "devinfo " + strings.Join(tc.args, " ")
		c := runDevinfo(t, "ibv_devinfo", tc.args...)
		g := runDevinfo(t, goDevinfo, tc.args...)
		if c.status != tc.status {
			t.Errorf("%s: ibv_devinfo exits %d, this test expects %d", what, c.status, tc.status)
		}
		if g.status != c.status {
			t.Errorf("%s: devinfo exits %d, ibv_devinfo %d", what, g.status, c.status)
		}
		if gs, cs := usageText(g.stdout, goDevinfo), usageText(c.stdout, "ibv_devinfo"); gs != cs {
			t.Errorf("%s: stdout\n%s\nibv_devinfo's:\n%s", what, g.stdout, c.stdout)
		}
		if gs, cs := strings.ReplaceAll(g.stderr, goDevinfo, "PROG"), strings.ReplaceAll(c.stderr, "ibv_devinfo", "PROG"); gs != cs {
			t.Errorf("%s: stderr %q, ibv_devinfo's %q", what, g.stderr, c.stderr)
		}
	}
}
