package accounts

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestTeamNames: a team's name is letters, digits, single spaces and a
// little punctuation; nothing that could pass for an owner's email
// beside it, draw nothing, stack over its neighbours or turn the line
// around.
func TestTeamNames(t *testing.T) {
	for name, want := range map[string]string{
		" Payroll ":              "Payroll",
		"R&D: north-east #2":     "R&D: north-east #2",
		"Équipe Paie":            "Équipe Paie",
		"Equipe\u0301":           "Equipé",
		"経理チーム":                  "経理チーム",
		"Payroll (cfo@acme.com)": "",
		"Pay  roll":              "",
		"Pay\u202eroll":          "",
		"Pay\u200broll":          "",
		"Pay\u3164roll":          "",
		"a\u030d\u030d\u030d":    "",
		"\u0301a":                "",
		"Pay\x00roll":            "",
		"<b>":                    "",
		"":                       "",
	} {
		got, err := CheckTeamName(name)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%q: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := CheckTeamName(strings.Repeat("a", MaxTeamName+1)); err == nil {
		t.Error("a name longer than MaxTeamName is taken")
	}
}

// FuzzTeamName: whatever an admin types, a name taken is at most
// MaxTeamName printable characters with no "@", bracket or format
// character, and taken again unchanged.
func FuzzTeamName(f *testing.F) {
	for _, seed := range []string{"Payroll", " R&D ", "Pay\u202eroll", "a\u030d\u030d\u030d", "x@y", "経理", "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := CheckTeamName(name)
		if err != nil {
			return
		}
		if !utf8.ValidString(got) || got == "" || utf8.RuneCountInString(got) > MaxTeamName || strings.ContainsAny(got, "@()[]<>") ||
			strings.ContainsFunc(got, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
			t.Fatalf("%q is taken as %q", name, got)
		}
		if again, err := CheckTeamName(got); err != nil || again != got {
			t.Fatalf("%q, taken as %q, is taken again as %q (%v)", name, got, again, err)
		}
	})
}
