package chaos

import (
	"context"
	"fmt"
	"time"
)

// setupChurn draws the churn schedule, writes every user's policy into the
// store and starts the nodes with --idle; the scenario brings its own
// devices.
func (e *Env) setupChurn(ctx context.Context, o Options) error {
	c := e.Cluster
	if c.Docker != nil {
		return fmt.Errorf("chaos: churn runs on the process backend (it writes the policies into the nodes' SQLite store)")
	}
	e.churn = newChurnPlan(o, o.Nodes, uint64(time.Now().UnixNano()))
	t0 := time.Now()
	written, err := e.churn.writePolicies(ctx, c.Dir)
	if err != nil {
		return err
	}
	e.say("churn: %d policies written in %.1f s", written, time.Since(t0).Seconds())
	c.Args = append(c.Args, "--idle", o.Idle.String())
	err = c.Start(ctx, o.Nodes)
	if err == nil {
		err = e.readBounds(ctx, c.Nodes[0])
	}
	if err != nil {
		c.Stop()
	}
	return err
}

// churnDefaults fills the churn options left 0.
func (o *Options) churnDefaults() {
	if o.Users <= 0 {
		o.Users = ChurnUsers
	}
	if o.Online <= 0 {
		o.Online = ChurnOnline
	}
	if o.Stay <= 0 {
		o.Stay = ChurnStay
	}
	if o.Idle <= 0 {
		o.Idle = ChurnIdle
	}
	if o.Waves <= 0 {
		o.Waves = ChurnWaves
	}
}
