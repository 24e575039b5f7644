package js_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/messages"
)

// closeCodes are the constants of type CloseCode in messages/codes.go,
// by name without the Close prefix (GoingAway: 1001).
func closeCodes(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../messages/codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	ast.Inspect(f, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok || len(v.Names) != 1 || len(v.Values) != 1 {
			return true
		}
		if typ, ok := v.Type.(*ast.Ident); ok && typ.Name == "CloseCode" {
			code, _ := strconv.Atoi(v.Values[0].(*ast.BasicLit).Value)
			out[strings.TrimPrefix(v.Names[0].Name, "Close")] = code
		}
		return true
	})
	return out
}

// screaming is GoingAway as GOING_AWAY.
func screaming(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// Close in presence.js and presence.d.ts names every close code of
// messages.CloseCode with its number (GoingAway: GOING_AWAY: 1001), and
// MAX_MESSAGE is messages.MaxMessage and ASK_EVERY client.AskEvery: the
// browser SDK cannot drift from the Go table.
func TestBrowserSDKConstantsMatchGo(t *testing.T) {
	codes := closeCodes(t)
	var listed []int
	for _, c := range codes {
		listed = append(listed, c)
	}
	slices.Sort(listed)
	want := make([]int, len(messages.CloseCodes))
	for i, c := range messages.CloseCodes {
		want[i] = int(c)
	}
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("messages/codes.go declares %v, messages.CloseCodes is %v", listed, want)
	}
	for _, file := range []string{"presence.js", "presence.d.ts"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		table := regexp.MustCompile(`(?s)export const Close\s*[:=][^{]*\{(.*?)\}`).FindSubmatch(src)
		if table == nil {
			t.Fatalf("%s has no Close table", file)
		}
		named := map[string]int{}
		for _, m := range regexp.MustCompile(`([A-Z_]+): (\d+)`).FindAllSubmatch(table[1], -1) {
			named[string(m[1])], _ = strconv.Atoi(string(m[2]))
		}
		for name, code := range codes {
			if got, ok := named[screaming(name)]; !ok || got != code {
				t.Errorf("%s: Close.%s = %d (named: %v), want %d (messages.Close%s)", file, screaming(name), got, ok, code, name)
			}
		}
		limit := regexp.MustCompile(`export const MAX_MESSAGE\s*[:=]\s*(\d+);`).FindSubmatch(src)
		if limit == nil || string(limit[1]) != strconv.Itoa(messages.MaxMessage) {
			t.Errorf("%s: MAX_MESSAGE %q, want messages.MaxMessage, %d", file, limit, messages.MaxMessage)
		}
		every := regexp.MustCompile(`export const ASK_EVERY\s*[:=]\s*(\d+);`).FindSubmatch(src)
		if every == nil || string(every[1]) != strconv.Itoa(client.AskEvery) {
			t.Errorf("%s: ASK_EVERY %q, want client.AskEvery, %d", file, every, client.AskEvery)
		}
	}
}
