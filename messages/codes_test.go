package messages

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The close codes table of docs/protocol.md lists exactly CloseCodes, in
// order: the codes are defined once, and the docs cannot drift from them.
func TestCloseCodesMatchProtocolDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile(`(?s)## Close codes\n(.*?)\n## `).FindSubmatch(doc)
	if section == nil {
		t.Fatal(`docs/protocol.md has no "## Close codes" section`)
	}
	var documented []CloseCode
	for _, m := range regexp.MustCompile(`(?m)^\| (\d{4}) \|`).FindAllSubmatch(section[1], -1) {
		code, _ := strconv.Atoi(string(m[1]))
		documented = append(documented, CloseCode(code))
	}
	if !slices.Equal(documented, CloseCodes) {
		t.Fatalf("docs/protocol.md close codes = %v, messages.CloseCodes = %v", documented, CloseCodes)
	}
}
