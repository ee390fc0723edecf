package accounts

import (
	"strings"
	"testing"
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
