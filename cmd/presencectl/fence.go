package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// serveAloneCmd tells a fenced node to serve as a new cluster (POST
// /api/fence/serve-alone on its admin API, with the admin token): the way
// out when the split-brain resolver cannot decide, e.g. the last survivor
// of two crashes at once. Never on one side of a live partition: both
// sides would serve.
func serveAloneCmd(args []string, out, errOut io.Writer) int {
	b, code, err := adminCall("serve-alone", "POST", "/api/fence/serve-alone", args, errOut)
	switch {
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintln(errOut, "presencectl serve-alone:", err)
		return 1
	case code == http.StatusNotFound:
		fmt.Fprintln(errOut, "presencectl serve-alone: the node is not fenced (it serves already)")
		return 1
	case code != http.StatusAccepted:
		fmt.Fprintf(errOut, "presencectl serve-alone: %d %s\n", code, strings.TrimSpace(string(b)))
		return 1
	}
	fmt.Fprintln(out, strings.TrimSpace(string(b)))
	return 0
}
