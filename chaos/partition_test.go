package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// A chain left by a harness killed mid-partition (SIGKILL: it never
// removed its own) is removed when the next run makes its firewall, jump
// and rules included; a live process's chain is left alone, this
// process's own live one too.
func TestNewFirewallRemovesStaleChains(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("iptables needs root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("no iptables")
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d", chainPrefix, gone.Process.Pid) // exited and reaped
	live := fmt.Sprintf("%s%d", chainPrefix, os.Getppid())      // the go command
	for _, c := range []string{stale, live} {
		for _, args := range [][]string{{"-N", c}, {"-A", c, "-d", "127.77.255.254", "-j", "DROP"}, {"-I", "OUTPUT", "1", "-j", c}} {
			if err := iptables(args...); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup((&firewall{chain: c}).remove)
	}
	f, err := newFirewall()
	if err != nil {
		t.Fatal(err)
	}
	defer f.remove()
	removeStale() // as a second cluster of this process would, before its own
	if err := iptables("-S", f.chain); err != nil {
		t.Fatalf("this process's live chain was removed: %v", err)
	}
	if iptables("-S", stale) == nil {
		t.Fatalf("%s of an exited process is still there", stale)
	}
	if err := iptables("-C", "OUTPUT", "-j", stale); err == nil {
		t.Fatalf("OUTPUT still jumps to %s", stale)
	}
	if err := iptables("-S", live); err != nil {
		t.Fatalf("%s of a live process was removed: %v", live, err)
	}
}
