package chaos

import (
	"context"
	"fmt"
	"time"
)

// Up counts the devices connected now (not closed by the server, not
// silenced).
func (f *Fleet) Up() int {
	up := 0
	for _, d := range f.Devices {
		d.mu.Lock()
		if d.conn != nil && d.closeCode == 0 && !d.silent {
			up++
		}
		d.mu.Unlock()
	}
	return up
}

// progress prints a line to o.Progress, if set.
func (o Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%s chaos: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// watchProgress prints the round's devices up every 5 s until ctx ends,
// so a long round shows it is alive.
func (o Options) watchProgress(ctx context.Context, round int, e *Env) {
	if o.Progress == nil || e.churn != nil { // churn prints its own
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.progress("round %d/%d: %s running, %d/%d devices up", round+1, o.Rounds, o.Scenario, e.Fleet.Up(), len(e.Fleet.Devices))
		}
	}
}
