// Package quietlog keeps libraries' chatter out of a node's info log:
// proto.actor and memberlist log their routine (actor starts, endpoint
// connections, dead letters, probes) at info and the expected effects of a
// member going away (a lost connection, a failed push/pull) at warn or
// error. presenced says each member change, fence and drain in one line of
// its own, so a library's records are lowered by a Rule before they reach
// the node's handler; `--log-level debug` shows them all.
package quietlog

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rule lowers a library's records.
type Rule struct {
	// Floor: records below it go to debug; at or above it they keep their
	// level (capped at warn: a library's error is the node's warning
	// until the node itself says what it means).
	Floor slog.Level
	// Expected are message prefixes that follow from a member change the
	// node already logs (a dead peer's connection erroring): debug.
	Expected []string
}

// Level is the level a library record of this message is logged at.
func (r Rule) Level(level slog.Level, msg string) slog.Level {
	if level < r.Floor {
		return slog.LevelDebug
	}
	for _, p := range r.Expected {
		if strings.HasPrefix(msg, p) {
			return slog.LevelDebug
		}
	}
	return min(level, slog.LevelWarn)
}

// ProtoActor is the rule for proto.actor's logger: everything under warn
// is its routine; a lost endpoint and gossip from a member it already
// dropped are what a member leaving or dying looks like from the others.
var ProtoActor = Rule{Floor: slog.LevelWarn, Expected: []string{
	"EndpointWriter", "EndpointReader", "EndpointWatcher", "Got gossip request from unknown member", "sendGossipForMember failed",
}}

// Memberlist is the rule for memberlist's log: probes, suspicion and
// failures to reach a member that is dying are its routine (presenced
// logs the member's failure once it is declared).
var Memberlist = Rule{Floor: slog.LevelWarn, Expected: []string{
	"Failed fallback TCP ping", "Push/Pull with", "Failed to send gossip", "Failed to send UDP ping",
	"Failed to send indirect UDP ping", "Failed to send UDP compound ping",
}}

// Handler applies a Rule to every record before passing it to the next
// handler, so `Enabled` asks the next one at the lowered level.
type Handler struct {
	next slog.Handler
	rule Rule
}

// New wraps next with rule.
func New(next slog.Handler, rule Rule) *Handler { return &Handler{next: next, rule: rule} }

// Enabled: a record may be raised to no more than its own level, so the
// cheap check is the next handler's at the lowest level this level maps to.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	if level < h.rule.Floor {
		return h.next.Enabled(ctx, slog.LevelDebug)
	}
	return h.next.Enabled(ctx, slog.LevelDebug) || h.next.Enabled(ctx, min(level, slog.LevelWarn))
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	level := h.rule.Level(r.Level, r.Message)
	if !h.next.Enabled(ctx, level) {
		return nil
	}
	out := slog.NewRecord(r.Time, level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
	return h.next.Handle(ctx, out)
}

func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), rule: h.rule}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), rule: h.rule}
}

// byteList is a []byte as fmt's %v prints it: "[123 34 105]".
var byteList = regexp.MustCompile(`\[(?:\d{1,3} )*\d{1,3}\]`)

// BytesAsText rewrites the byte lists in a library's message (memberlist
// prints node metadata with %v) as quoted text when they are printable
// UTF-8, the JSON of cluster.Meta for one.
func BytesAsText(msg string) string {
	return byteList.ReplaceAllStringFunc(msg, func(list string) string {
		fields := strings.Fields(strings.Trim(list, "[]"))
		b := make([]byte, 0, len(fields))
		for _, f := range fields {
			n, err := strconv.Atoi(f)
			if err != nil || n > 255 {
				return list
			}
			b = append(b, byte(n))
		}
		if !utf8.Valid(b) || strings.IndexFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return list
		}
		return strconv.Quote(string(b))
	})
}
