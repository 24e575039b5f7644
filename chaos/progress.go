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
			if f := e.sdk.Load(); f != nil { // the scenario's own devices: the SDK's
				up, all := f.connected()
				o.progress("round %d/%d: %s running, %d/%d SDK sessions connected", round+1, o.Rounds, o.Scenario, up, all)
				continue
			}
			o.progress("round %d/%d: %s running, %d/%d devices up", round+1, o.Rounds, o.Scenario, e.Fleet.Up(), len(e.Fleet.Devices))
		}
	}
}

// connected counts the fleet's sessions (devices and watchers) connected
// now, of all.
func (f *sdkFleet) connected() (up, all int) {
	for _, s := range f.devices {
		if s.Hello() != nil {
			up++
		}
	}
	for _, w := range f.watchers {
		if w.s.Hello() != nil {
			up++
		}
	}
	return up, len(f.devices) + len(f.watchers)
}
