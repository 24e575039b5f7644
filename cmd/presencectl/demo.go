package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
)

// demoFlags are presencectl demo's settings.
type demoFlags struct {
	ws, admin    []string
	devices      int
	life, status time.Duration
	secret       string
	token        string
	seed         uint64
}

func parseDemo(args []string, errOut io.Writer) (demoFlags, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	ws := fs.String("ws", "ws://127.0.0.1:7600/ws,ws://127.0.0.1:7601/ws,ws://127.0.0.1:7602/ws", "node WebSocket URLs, comma-separated")
	admin := fs.String("admin", "http://127.0.0.1:7700,http://127.0.0.1:7701,http://127.0.0.1:7702", "node admin URLs, comma-separated (status lines; the first that answers takes the policies)")
	d := demoFlags{}
	fs.IntVar(&d.devices, "devices", 20, "demo devices (users demo-000...)")
	fs.DurationVar(&d.life, "life", 30*time.Second, "mean connection life: each lasts uniform [life/2, 3 life/2], then the device is away up to life/4")
	fs.DurationVar(&d.status, "status", 5*time.Second, "print one status line for the nodes this often (0: never)")
	fs.StringVar(&d.secret, "secret", os.Getenv(config.EnvName("secret")), "device-token HMAC key (default PRESENCE_SECRET, else the dev key)")
	fs.StringVar(&d.token, "admin-token", os.Getenv(config.EnvName("admin-token")), "admin bearer token")
	fs.Uint64Var(&d.seed, "seed", uint64(time.Now().UnixNano()), "seed of the devices' random draws")
	if err := fs.Parse(args); err != nil {
		return d, err
	}
	d.ws, d.admin = splitList(*ws), splitList(*admin)
	if d.devices < 1 || d.devices > 10000 || len(d.ws) == 0 || d.life <= 0 {
		return d, fmt.Errorf("--devices must be in [1, 10000], --ws non-empty, --life > 0")
	}
	if d.secret == "" {
		d.secret = config.DevSecret
	}
	return d, nil
}

// splitList reads a comma-separated list of URLs: spaces around the
// commas and empty items are dropped (a URL holds no space).
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// demoCmd runs demo devices against a cluster, each in its own reconnecting
// client.Session, device i starting at node i mod n: when a node dies or
// drains, its devices reconnect to the others. Users demo-000... are each
// other's exact contacts and each subscribes to the next one. It prints a
// status line of the nodes every --status until interrupted.
func demoCmd(args []string, out, errOut io.Writer) int {
	d, err := parseDemo(args, errOut)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl demo:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	users := make([]string, d.devices)
	for i := range users {
		users[i] = fmt.Sprintf("demo-%03d", i)
	}
	if err := demoPolicies(ctx, d, users); err != nil {
		fmt.Fprintln(errOut, "presencectl demo:", err)
		return 1
	}
	fmt.Fprintf(out, "demo: %d devices over %d nodes (demo-000 to %s, each watching the next)\n", d.devices, len(d.ws), users[len(users)-1])
	if d.status > 0 {
		fmt.Fprintf(out, "every %v, each node: name[members it sees alive] devices connected to it, lease/view actors it hosts\n", d.status)
	}
	for i, u := range users {
		urls := append(slices.Clone(d.ws[i%len(d.ws):]), d.ws[:i%len(d.ws)]...)
		go demoDevice(ctx, d, u, users[(i+1)%len(users)], urls, rand.New(rand.NewPCG(d.seed, uint64(i))))
	}
	if d.status > 0 {
		for {
			select {
			case <-ctx.Done():
				return 0
			case <-time.After(d.status):
				fmt.Fprintln(out, statusLine(d))
			}
		}
	}
	<-ctx.Done()
	return 0
}

// demoPolicies makes every demo user an exact contact of all the others,
// through the first node that answers (retried for up to 30 s: the nodes
// may still be starting).
func demoPolicies(ctx context.Context, d demoFlags, users []string) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for i, u := range users {
		body, _ := json.Marshal(map[string]any{"granularity": "exact", "contacts": slices.Delete(slices.Clone(users), i, i+1)})
		for {
			_, code, err := adminDo("PUT", d.admin[0]+"/api/users/"+u+"/policy", d.token, body)
			if err == nil && code/100 == 2 {
				break
			}
			if last = err; err == nil {
				last = fmt.Errorf("PUT policy of %s: HTTP %d", u, code)
			}
			d.admin = append(d.admin[1:], d.admin[0]) // the next node
			if time.Now().After(deadline) || ctx.Err() != nil {
				return errors.Join(last, ctx.Err())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// demoDevice connects, stays a while, closes, stays away a while, again.
func demoDevice(ctx context.Context, d demoFlags, user, watch string, urls []string, r *rand.Rand) {
	tok, err := gateway.Tokens{Key: []byte(d.secret)}.Mint(user, "phone", 24*time.Hour)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		life := d.life/2 + time.Duration(r.Int64N(int64(d.life)))
		sctx, cancel := context.WithTimeout(ctx, life)
		s := client.Start(sctx, client.Config{URLs: urls, Token: tok, Rand: rand.New(rand.NewPCG(r.Uint64(), 0)), BackoffMax: 5 * time.Second})
		s.Subscribe(watch)
		for range s.Events() { // until the session ends
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(r.Int64N(int64(d.life / 4)))):
		}
	}
}

// statusLine is one line for all nodes: for each, the members it sees
// alive, its connected devices and its lease and view actors, or "down".
func statusLine(d demoFlags) string {
	parts := []string{}
	for _, a := range d.admin {
		parts = append(parts, nodeStatus(a, d.token))
	}
	return time.Now().Format("15:04:05 ") + strings.Join(parts, " | ")
}

func nodeStatus(admin, token string) string {
	b, code, err := adminDo("GET", admin+"/api/cluster", token, nil)
	var c struct {
		Self    string                    `json:"self"`
		Members []struct{ State string }  `json:"members"`
		Actors  map[string]map[string]int `json:"actors"`
	}
	if err != nil || code != 200 || json.Unmarshal(b, &c) != nil {
		return fmt.Sprintf("%-20s", strings.TrimPrefix(admin, "http://")+" down")
	}
	alive := 0
	for _, m := range c.Members {
		if m.State == "alive" {
			alive++
		}
	}
	a := c.Actors[c.Self]
	return fmt.Sprintf("%s[%d] %3d dev %3d/%-3d", c.Self, alive, a["connection"], a["lease"], a["view"])
}
