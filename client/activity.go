package client

import (
	"context"
	"strings"
	"time"

	"github.com/presence-im/presence/core"
	"github.com/presence-im/presence/messages"
)

// SetActivity declares what the device is doing: active (in the
// foreground, the user present), idle (in the foreground, no input) or
// background. The session tells the node at once if it changed, at every
// handshake after, and renews an active before the node's idle-after
// (the hello's idle_after_ms) would turn it idle; an app calls it with
// active on input as often as it likes: only changes are sent.
func (s *Session) SetActivity(a messages.Activity) error {
	if err := core.ValidActivity(a); err != nil {
		return err
	}
	s.mu.Lock()
	changed := s.activity != a
	s.activity = a
	c := s.conn
	s.mu.Unlock()
	if changed && c != nil {
		_ = c.SetActivity(context.Background(), a)
	}
	return nil
}

// Activity is the device's declared activity (0: none declared).
func (s *Session) Activity() messages.Activity { return s.currentActivity() }

func (s *Session) currentActivity() messages.Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activity
}

// declared is what a state sync answers: the declared activity, or active
// for a device that declared none (it counts as active).
func (s *Session) declared() messages.Activity {
	if a := s.currentActivity(); a != messages.Activity_activity_unspecified {
		return a
	}
	return messages.Activity_active
}

// renewActivity declares active again at half the node's idle-after while
// the device is active, so that the node never turns it idle while the
// app says it is in use.
func (s *Session) renewActivity(ctx context.Context, c *Conn) {
	every := time.Duration(c.Hello.GetIdleAfterMs()) * time.Millisecond / 2
	if every <= 0 {
		return // a node of an earlier version: nothing lapses there
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.currentActivity() == messages.Activity_active && c.SetActivity(ctx, messages.Activity_active) != nil {
			return
		}
	}
}

// retryActivity tells the node the declared activity again once a
// set_activity it refused for its rate (429) may pass: the node kept the
// state from before it, and the device's must not drift from it.
func (s *Session) retryActivity(ctx context.Context, c *Conn, e *messages.Error) {
	if e.GetCode() != uint32(messages.ErrSlowDown) || !strings.HasPrefix(e.GetMessage(), "set_activity") {
		return
	}
	wait := time.Duration(e.GetRetryAfterMs()) * time.Millisecond
	time.AfterFunc(wait, func() {
		if ctx.Err() == nil {
			if a := s.currentActivity(); a != messages.Activity_activity_unspecified {
				_ = c.SetActivity(ctx, a)
			}
		}
	})
}
