package tenant

import (
	"cmp"
	"strings"

	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
)

// The Activity page reads the trail as sentences: who did what, to which
// files, on which connection, and how it ended. Each page of the web UI
// that reaches the files calls the gateway with the UI's own keys (the
// file browser's, a share link's) and an id of its request (gatewayID):
// those calls, by those keys alone, are folded into the action that made
// them, so that what a person did shows once. The exports keep every
// record.

// trailRow is a record as the Activity page shows it.
type trailRow struct {
	audit.Record
	// Who and Did are the sentence; Outcome the result in words.
	Who, Did, Outcome string
	// Calls are the gateway's records of what this action did for it.
	Calls int
}

// verbs say what an action did, before its paths.
var verbs = map[string]string{
	"webui.signup": "signed up", "webui.login": "logged in", "webui.logout": "logged out",
	"webui.connection.create": "added a connection", "webui.connection.update": "changed the connection",
	"webui.connection.delete": "deleted the connection", "webui.connection.try": "tried the connection",
	"webui.watch.create": "started watching", "webui.watch.delete": "stopped watching",
	"webui.file.list": "opened the folder", "webui.file.view": "looked at", "webui.file.download": "downloaded",
	"webui.file.mkdir": "made the folder", "webui.file.rename": "renamed", "webui.file.delete": "deleted", "webui.file.upload": "uploaded",
	"webui.transfer.create": "started a transfer", "webui.transfer.delete": "removed a transfer",
	"webui.expectation.create": "started expecting files in", "webui.expectation.delete": "deleted the expectation",
	"webui.openpgp.create": "added an OpenPGP key", "webui.openpgp.delete": "deleted an OpenPGP key",
	"webui.key.create": "made an API key", "webui.key.revoke": "revoked an API key",
	"webui.member.add": "added a member", "webui.member.remove": "removed a member",
	"webui.share.create": "made a share link", "webui.share.delete": "deleted a share link",
	"webui.share.download": "downloaded through a share link", "webui.share.upload": "sent through a share link",
	"webui.team.switch": "switched team", "webui.team.create": "made their own team", "webui.team.rename": "renamed the team",
	"gateway.read": "read", "gateway.write": "wrote", "gateway.list": "listed", "gateway.stat": "looked at",
	"gateway.unlink": "deleted", "gateway.rmdir": "deleted the folder", "gateway.mkdir": "made the folder",
	"gateway.rename": "renamed", "gateway.copy": "copied", "gateway.upload": "uploaded", "gateway.chmod": "changed the mode of",
}

// outcomes say results in words.
var outcomes = map[string]string{
	audit.ResultOK: "Done", "unauthorized": "Refused: not signed in, or a wrong password", "forbidden": "Not allowed",
	"not_found": "Not found", "rate_limited": "Refused: too many attempts", "already_exists": "Refused: already there",
}

// row makes a record's sentence.
func row(r audit.Record) trailRow {
	out := trailRow{Record: r, Who: r.Actor.Name}
	switch r.Actor.Kind {
	case audit.ActorKey:
		out.Who = "API key " + r.Actor.Name
	case "SftpWatch", "Transfer", "TransferSchedule", "ShareLink":
		out.Who = "the " + kindWords(r.Actor.Kind) + " " + r.Actor.Name
	}
	verb := verbs[r.Action]
	if verb == "" {
		_, after, _ := strings.Cut(r.Action, ".")
		verb = strings.ReplaceAll(cmp.Or(after, r.Action), ".", " ")
	}
	did := []string{verb}
	if len(r.Paths) > 0 {
		did = append(did, strings.Join(r.Paths, " to "))
	} else if _, name, ok := strings.Cut(r.Object, "/"); ok && !strings.HasPrefix(name, "sftpgate-") {
		did = append(did, name)
	}
	if r.Connection != "" {
		did = append(did, "on "+r.Connection)
	}
	out.Did = strings.Join(did, " ")
	out.Outcome = outcomes[r.Result]
	if out.Outcome == "" {
		out.Outcome = "Failed: " + strings.ReplaceAll(r.Result, "_", " ")
	}
	return out
}

// kindWords is a kind as a sentence says it.
func kindWords(kind string) string {
	return map[string]string{"SftpWatch": "watch", "Transfer": "transfer", "TransferSchedule": "schedule", "ShareLink": "share link"}[kind]
}

// trailRows are records (newest first) as rows, the gateway's records of
// the UI's own calls (by its keys, uiKeys) folded into the UI's record of
// the same request.
func trailRows(records []audit.Record, uiKeys map[string]bool) []trailRow {
	ui := map[string]int{} // the UI's records by the id it forwarded
	for i, r := range records {
		if id := gw.GatewayID(r.RequestID); strings.HasPrefix(r.Action, "webui.") && id != "" {
			ui[id] = i
		}
	}
	calls := make([]int, len(records))
	folded := make([]bool, len(records))
	for i, r := range records {
		if j, ok := ui[r.RequestID]; ok && strings.HasPrefix(r.Action, "gateway.") && r.Actor.Kind == audit.ActorKey && uiKeys[r.Actor.Name] {
			calls[j]++
			folded[i] = true
		}
	}
	rows := make([]trailRow, 0, len(records))
	for i, r := range records {
		if !folded[i] {
			out := row(r)
			out.Calls = calls[i]
			rows = append(rows, out)
		}
	}
	return rows
}
