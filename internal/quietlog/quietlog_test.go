package quietlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestRuleLowersRoutineAndExpected(t *testing.T) {
	for _, c := range []struct {
		rule  Rule
		level slog.Level
		msg   string
		want  slog.Level
	}{
		{ProtoActor, slog.LevelInfo, "[DeadLetter]", slog.LevelDebug},
		{ProtoActor, slog.LevelInfo, "Started EndpointManager", slog.LevelDebug},
		{ProtoActor, slog.LevelError, "EndpointWriter lost connection", slog.LevelDebug},
		{ProtoActor, slog.LevelWarn, "Got gossip request from unknown member", slog.LevelDebug},
		{ProtoActor, slog.LevelWarn, "sendGossipForMember failed", slog.LevelDebug},
		{ProtoActor, slog.LevelError, "failed to start remote", slog.LevelWarn}, // capped, kept
		{ProtoActor, slog.LevelWarn, "something new", slog.LevelWarn},
		{Memberlist, slog.LevelInfo, "Suspect n2 has failed, no acks received", slog.LevelDebug},
		{Memberlist, slog.LevelError, "Push/Pull with n2 failed: dial tcp", slog.LevelDebug},
		{Memberlist, slog.LevelWarn, "Refuting a suspect message (from: n2)", slog.LevelWarn},
	} {
		if got := c.rule.Level(c.level, c.msg); got != c.want {
			t.Errorf("%q at %v: got %v, want %v", c.msg, c.level, got, c.want)
		}
	}
}

func TestHandlerAtInfoShowsOnlyWhatIsLeft(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), ProtoActor)).With("lib", "protoactor")
	log.Info("[DeadLetter]", "pid", "x")
	log.Error("EndpointWriter lost connection", "address", "127.0.0.1:1")
	log.Error("failed to start remote", "err", "boom")
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "lib=protoactor") ||
		!strings.Contains(out, "failed to start remote") || !strings.Contains(out, "err=boom") {
		t.Fatalf("at info, only the unexpected error as a warning with its attributes: %q", out)
	}
	buf.Reset()
	debug := slog.New(New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), ProtoActor))
	debug.Info("[DeadLetter]")
	if !strings.Contains(buf.String(), "level=DEBUG") {
		t.Fatalf("at debug the routine shows, at debug: %q", buf.String())
	}
}

func TestBytesAsText(t *testing.T) {
	in := `Refuting an alive message for 'n2' (127.0.0.1:7947) meta:([123 34 105 34 58 34 120 34 125] VS [1 2 255]), vsn:([1 5 2] VS [1 5 2])`
	got := BytesAsText(in)
	if !strings.Contains(got, `meta:("{\"i\":\"x\"}" VS [1 2 255])`) {
		t.Fatalf("printable metadata as quoted text, the rest left alone: %s", got)
	}
	if BytesAsText("[300 1]") != "[300 1]" {
		t.Fatal("a list that is not bytes is left alone")
	}
}
