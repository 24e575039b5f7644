package actors

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/presence-im/presence/config"
	"github.com/presence-im/presence/core"
)

// E01 6.1 "主动关闭（300 秒） | 320 秒发布离线，恰好等于去抖": a graceful
// close at 300 s is published offline at exactly 320 s.
func TestGracefulClosePublishesAtDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, config.Seed())
		e.policy("alice", core.Exact, "bob")
		p := e.subscribe("alice", "bob")
		d := e.connect(e.n.Gateway(), "alice", "phone", 1)
		time.Sleep(300 * time.Second)
		d.close()
		time.Sleep(60 * time.Second)
		synctest.Wait()
		want := []string{"0s online", "5m20s offline"}
		if got := e.statuses(p); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
	})
}
