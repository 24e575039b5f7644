package chaos

import (
	"testing"

	"go.uber.org/goleak"
)

// A run leaves no goroutine behind: its devices and watchers end with
// their round.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(), // nbio's package-level task pool
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}
