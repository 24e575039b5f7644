package messages

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The close codes table of docs/protocol.md lists exactly CloseCodes, and
// its error codes table exactly ErrorCodes, in order: the codes are defined
// once, and the docs cannot drift from them.
func TestCloseCodesMatchProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := documented(t, doc, "## Close codes", `\d{4}`); !slices.Equal(got, widen(CloseCodes)) {
		t.Errorf("docs/protocol.md close codes = %v, messages.CloseCodes = %v", got, CloseCodes)
	}
	if got := documented(t, doc, "### Error codes", `\d{3}`); !slices.Equal(got, widen(ErrorCodes)) {
		t.Errorf("docs/protocol.md error codes = %v, messages.ErrorCodes = %v", got, ErrorCodes)
	}
}

// documented is the codes in the first column of the table under heading,
// up to the next heading.
func documented(t *testing.T, doc []byte, heading, digits string) []int {
	t.Helper()
	section := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(heading) + `\n(.*?)\n#`).FindSubmatch(doc)
	if section == nil {
		t.Fatalf("docs/protocol.md has no %q section", heading)
	}
	var codes []int
	for _, m := range regexp.MustCompile(`(?m)^\| (`+digits+`) \|`).FindAllSubmatch(section[1], -1) {
		code, _ := strconv.Atoi(string(m[1]))
		codes = append(codes, code)
	}
	return codes
}

func widen[T CloseCode | ErrorCode](codes []T) []int {
	out := make([]int, len(codes))
	for i, c := range codes {
		out[i] = int(c)
	}
	return out
}
