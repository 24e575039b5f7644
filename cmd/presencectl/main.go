// Command presencectl is the operator and developer CLI of presence:
// device tokens, status and watch against a node's admin API, the E01
// simulation in virtual time, and a loopback load generator that measures a
// node's memory per connection. Run it without arguments for the usage.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
	"github.com/presence-im/presence/sim"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage:
  presencectl status [--admin URL] USER                 status and devices of a user
  presencectl ready [--admin URL]                        exit 0 if the node is ready (GET /readyz)
  presencectl watch [--admin URL] [--every 1s] USER...   print each change of the users' statuses
  presencectl serve-alone [--admin URL]                 a fenced node serves as a new cluster (admin token)
  presencectl token --user U --device D [--ttl 24h] [--secret S]   (secret also PRESENCE_SECRET, or --secret-file / PRESENCE_SECRET_FILE)
  presencectl sim e01 [--json] [--seed N] [--timing seed|fast]
  presencectl sim activity [--json] [--seed N] [--timing seed|fast] [--users 100]   declared activity across an owner crash
  presencectl demo [--devices 20] [--ws URL,...] [--admin URL,...] [--life 30s] [--status 5s]   reconnecting demo devices spread over the nodes
  presencectl webhook-listen [--listen 127.0.0.1:7800] [--secret S]   a test webhook receiver: checks signatures, prints events (secret also PRESENCE_WEBHOOK_SECRET)
  presencectl load --conns N --pid PID [--url ws://127.0.0.1:7600/ws] [--admin http://127.0.0.1:7700]
`

func run(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(errOut, usage)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(errOut, "presencectl: unknown command %q\n%s", args[0], usage)
		return 2
	}
	return cmd(args[1:], out, errOut)
}

// commands are presencectl's subcommands by name, each given the arguments
// after its name.
var commands = map[string]func(args []string, out, errOut io.Writer) int{
	"sim":            simCmd,
	"token":          tokenCmd,
	"load":           loadCmd,
	"demo":           demoCmd,
	"status":         statusCmd,
	"watch":          watchCmd,
	"serve-alone":    serveAloneCmd,
	"ready":          readyCmd,
	"webhook-listen": webhookListenCmd,
}

// tokenCmd prints a device token as the last line of output.
func tokenCmd(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(errOut)
	user := fs.String("user", "", "user id")
	device := fs.String("device", "", "device id")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	secret := fs.String("secret", "", "HMAC key (default PRESENCE_SECRET, else the dev key)")
	secretFile := fs.String("secret-file", os.Getenv(config.EnvName("secret-file")), "file whose first line is the HMAC key, as presenced's --secret-file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	key := *secret
	if key == "" {
		key = os.Getenv(config.EnvName("secret"))
	}
	if key == "" && *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			fmt.Fprintln(errOut, "presencectl token:", err)
			return 2
		}
		key, _, _ = strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
		key = strings.TrimRight(key, "\r")
	}
	if key == "" {
		key = config.DevSecret
		fmt.Fprintln(errOut, "presencectl: warning: signing with the public dev secret")
	}
	tok, err := gateway.Tokens{Key: []byte(key)}.Mint(*user, *device, *ttl)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl token:", err)
		return 2
	}
	fmt.Fprintln(out, tok)
	return 0
}

func simCmd(args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] != "e01" && args[0] != "activity" {
		fmt.Fprintf(errOut, "presencectl sim: the experiments are e01 and activity\n%s", usage)
		return 2
	}
	fs := flag.NewFlagSet("sim "+args[0], flag.ContinueOnError)
	fs.SetOutput(errOut)
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	seed := fs.Int64("seed", 1, "seed of every random draw")
	preset := fs.String("timing", "seed", "timing preset: seed or fast")
	users := fs.Int("users", 100, "activity: users, each with a phone and a laptop")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	t, err := config.Preset(*preset)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl:", err)
		return 2
	}
	if args[0] == "activity" {
		return activityReport(out, errOut, sim.Activity(t, *preset, *seed, *users), *asJSON)
	}
	r := sim.E01(t, *preset, *seed)
	if *asJSON {
		enc := json.NewEncoder(out)
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(errOut, "presencectl:", err)
			return 1
		}
		return 0
	}
	printReport(out, r)
	return 0
}

// activityReport prints the activity experiment; exit 1 if it failed.
func activityReport(out, errOut io.Writer, r sim.ActivityReport, asJSON bool) int {
	if asJSON {
		if err := json.NewEncoder(out).Encode(r); err != nil {
			fmt.Fprintln(errOut, "presencectl:", err)
			return 1
		}
	} else {
		fmt.Fprintf(out, "declared activity across an owner crash, preset %s, seed %d: %d users, %d devices\n", r.Preset, r.Seed, r.Users, r.Devices)
		fmt.Fprintf(out, "views holding the declared activity: %d before the crash, %d after the failover; subscribers sent the derived show: %d\n", r.Before, r.After, r.Seen)
		for _, l := range r.Lost {
			fmt.Fprintln(out, "  differs:", l)
		}
	}
	if !r.OK {
		return 1
	}
	return 0
}

func printReport(out io.Writer, r sim.E01Report) {
	fmt.Fprintf(out, "E01 in virtual time, preset %s, seed %d (seconds)\n", r.Preset, r.Seed)
	fmt.Fprintf(out, "%-15s %5s %9s %9s %9s %9s\n", "leave mode", "n", "min", "median", "max", "bound")
	for _, row := range []struct {
		name string
		s    sim.Stats
	}{{"graceful close", r.Detection.GracefulClose}, {"half-open", r.Detection.HalfOpen}, {"gateway crash", r.Detection.GatewayCrash}} {
		fmt.Fprintf(out, "%-15s %5d %9.3f %9.3f %9.3f %9.3f\n", row.name, row.s.N, row.s.Min, row.s.Median, row.s.Max, row.s.Bound)
	}
	rs := r.RenewStorm
	fmt.Fprintf(out, "renewals, %d gateways / %d connections restarted together: peak %d/s without jitter, %d/s with (mean %.1f/s); live leases %d / %d\n",
		rs.Gateways, rs.Connections, rs.PeakPerSNoJitter, rs.PeakPerSJitter, rs.MeanPerS, rs.FinalLeases, rs.FinalLeasesJitter)
	tt := r.TTLTooShort
	fmt.Fprintf(out, "TTL %gs < renew %gs: %d lease expiries, %d published flips with the debounce, %d without\n",
		tt.TTL, tt.Renew, tt.DeviceFlaps, tt.PublishedFlapsDebounce20s, tt.PublishedFlapsDebounce0)
	fmt.Fprintf(out, "lower bound ok: %v\n", r.LowerBoundOK)
}
