package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/gateway"
)

// loadCmd opens many idle, heartbeating device connections to one node and
// reports the node's memory per connection: RSS from /proc/PID/status and
// heap and goroutines from its /metrics. Loopback only.
func loadCmd(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(errOut)
	url := fs.String("url", "ws://127.0.0.1:7600/ws", "node /ws URL")
	admin := fs.String("admin", "http://127.0.0.1:7700", "node admin URL (for /metrics)")
	pid := fs.Int("pid", 0, "node process id (for RSS)")
	conns := fs.Int("conns", 1000, "connections to open")
	secret := fs.String("secret", config.DevSecret, "token secret of the node")
	settle := fs.Duration("settle", 5*time.Second, "wait after the last connection before measuring")
	rate := fs.Int("rate", 400, "handshakes per second")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !strings.HasPrefix(*url, "ws://127.") && !strings.HasPrefix(*url, "ws://localhost") {
		fmt.Fprintln(errOut, "presencectl load: loopback URLs only")
		return 2
	}
	before, err := sample(*pid, *admin)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl load:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokens := gateway.Tokens{Key: []byte(*secret)}
	var open atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(*rate, 1)))
	defer tick.Stop()
	for i := range *conns {
		<-tick.C
		tok, _ := tokens.Mint(fmt.Sprintf("load-%06d", i), "d", time.Hour)
		c, err := client.Dial(ctx, *url, client.DialOptions{Token: tok, Attempt: uint64(time.Now().UnixMilli())})
		if err != nil {
			fmt.Fprintf(errOut, "presencectl load: connection %d: %v\n", i, err)
			break
		}
		open.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle(ctx, c)
		}()
	}
	time.Sleep(*settle)
	after, err := sample(*pid, *admin)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl load:", err)
		return 1
	}
	n := float64(open.Load())
	fmt.Fprintf(out, "connections %d\n", open.Load())
	fmt.Fprintf(out, "rss_kib_per_conn %.2f\n", (after.rss-before.rss)/1024/n)
	fmt.Fprintf(out, "heap_inuse_kib_per_conn %.2f\n", (after.heap-before.heap)/1024/n)
	fmt.Fprintf(out, "goroutines_per_conn %.3f\n", (after.goroutines-before.goroutines)/n)
	cancel()
	wg.Wait()
	return 0
}

// idle keeps c online as an idle device would: it heartbeats, and reads so
// that pongs and acks drain; it closes c when ctx ends.
func idle(ctx context.Context, c *client.Conn) {
	go func() {
		for {
			if _, err := c.Next(ctx); err != nil {
				return
			}
		}
	}()
	iv := time.Duration(c.Hello.GetHeartbeatIntervalMs()) * time.Millisecond
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			_ = c.CloseNow()
			return
		case <-time.After(iv * 9 / 10):
		}
		if c.Heartbeat(ctx, seq) != nil {
			return
		}
	}
}

type memSample struct{ rss, heap, goroutines float64 }

func sample(pid int, admin string) (memSample, error) {
	var s memSample
	if pid > 0 {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return s, err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
				s.rss = kb * 1024
			}
		}
	}
	res, err := http.Get(admin + "/metrics")
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "go_memstats_heap_inuse_bytes":
			s.heap = v
		case "go_goroutines":
			s.goroutines = v
		}
	}
	return s, nil
}
