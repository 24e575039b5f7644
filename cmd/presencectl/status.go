package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/presence-im/presence/config"
)

// adminFlags are the flags of the commands that talk to a node's admin API.
func adminFlags(name string, errOut io.Writer) (*flag.FlagSet, *string, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	addr := fs.String("admin", "http://127.0.0.1:7700", "node admin URL")
	token := fs.String("admin-token", os.Getenv(config.EnvName("admin-token")), "admin bearer token")
	return fs, addr, token
}

// errUsage: the command line was wrong, and the usage is printed.
var errUsage = errors.New("usage")

// adminCall parses the admin flags of a command that takes no arguments
// and sends method path, without a body, to the node's admin API.
func adminCall(name, method, path string, args []string, errOut io.Writer) ([]byte, int, error) {
	fs, addr, token := adminFlags(name, errOut)
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprint(errOut, usage)
		return nil, 0, errUsage
	}
	return adminDo(method, *addr+path, *token, nil)
}

func adminDo(method, u, token string, body []byte) ([]byte, int, error) {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return b, res.StatusCode, err
}

// statusCmd prints a user's status and devices (GET /api/presence/{user}).
func statusCmd(args []string, out, errOut io.Writer) int {
	fs, addr, token := adminFlags("status", errOut)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprint(errOut, usage)
		return 2
	}
	b, code, err := adminDo("GET", *addr+"/api/presence/"+url.PathEscape(fs.Arg(0)), *token, nil)
	if err != nil {
		fmt.Fprintln(errOut, "presencectl status:", err)
		return 1
	}
	fmt.Fprintln(out, strings.TrimSpace(string(b)))
	if code != http.StatusOK {
		return 1
	}
	return 0
}

// watchCmd polls the users' statuses every --every and prints each change
// with the time it was seen, until interrupted.
func watchCmd(args []string, out, errOut io.Writer) int {
	fs, addr, token := adminFlags("watch", errOut)
	every := fs.Duration("every", time.Second, "poll period")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprint(errOut, usage)
		return 2
	}
	body, _ := json.Marshal(map[string][]string{"users": fs.Args()})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	last := map[string]string{}
	for {
		b, code, err := adminDo("POST", *addr+"/api/presence/batch", *token, body)
		var res struct {
			Users []struct {
				User    string            `json:"user"`
				Status  string            `json:"status"`
				Devices []json.RawMessage `json:"devices"`
			} `json:"users"`
		}
		switch {
		case err != nil:
			fmt.Fprintln(errOut, "presencectl watch:", err)
		case code != http.StatusOK || json.Unmarshal(b, &res) != nil:
			fmt.Fprintf(errOut, "presencectl watch: %d %s\n", code, b)
		}
		for _, u := range res.Users {
			now := fmt.Sprintf("%s (%d devices)", u.Status, len(u.Devices))
			if last[u.User] != now {
				fmt.Fprintf(out, "%s %s %s\n", time.Now().Format("15:04:05.000"), u.User, now)
				last[u.User] = now
			}
		}
		select {
		case <-stop:
			return 0
		case <-time.After(*every):
		}
	}
}

// readyCmd exits 0 when the node's /readyz answers 200 (the container
// health check of the FROM-scratch image, which has no curl).
func readyCmd(args []string, out, errOut io.Writer) int {
	b, code, err := adminCall("ready", "GET", "/readyz", args, errOut)
	if errors.Is(err, errUsage) {
		return 2
	}
	if err != nil || code != http.StatusOK {
		fmt.Fprintf(errOut, "presencectl ready: %d %s %v\n", code, strings.TrimSpace(string(b)), err)
		return 1
	}
	fmt.Fprintln(out, "ready")
	return 0
}
