package tenant

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// tryResult is what "try it" shows: the request and the gateway's answer.
type tryResult struct {
	Command string
	Body    string
	Status  int
	Answer  string
	Error   string
}

// tryCommands are offered in "try it"; the gateway knows more.
var tryCommands = []v1alpha1.Command{v1alpha1.CommandPing, v1alpha1.CommandList, v1alpha1.CommandWrite, v1alpha1.CommandRead,
	v1alpha1.CommandStat, v1alpha1.CommandExists, v1alpha1.CommandMkdir, v1alpha1.CommandUnlink}

// TryIt sends a command through the gateway, as a client would, with the
// key the person pasted, and shows the answer on the connection's page.
func (u *Pages) TryIt(w http.ResponseWriter, r *http.Request, c *v1alpha1.SftpConnection) error {
	res := &tryResult{Command: r.PostFormValue("command"), Body: strings.TrimSpace(r.PostFormValue("body"))}
	token := strings.TrimSpace(r.PostFormValue("key"))
	switch {
	case !validCommand(res.Command):
		res.Error = "choose a command"
	case token == "":
		res.Error = "paste an API key: it is shown once, when you create it"
	case res.Body != "" && !json.Valid([]byte(res.Body)):
		res.Error = "the request body is not valid JSON"
	default:
		u.send(r, c, token, res)
	}
	return u.renderConnection(w, r, c, res)
}

func validCommand(c string) bool { return slices.Contains(tryCommands, v1alpha1.Command(c)) }

// maxTryAnswer bounds the answer shown.
const maxTryAnswer = 64 << 10

func (u *Pages) send(r *http.Request, c *v1alpha1.SftpConnection, token string, res *tryResult) {
	body := res.Body
	if body == "" {
		body = "{}"
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.TryURL+"/"+u.View(c).Slug+"/"+res.Command, strings.NewReader(body))
	if err != nil {
		res.Error = "the gateway's address is not valid"
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := u.HTTPClient.Do(req)
	if err != nil {
		res.Error = "the gateway did not answer; is it running?"
		return
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxTryAnswer))
	res.Status = resp.StatusCode
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") == nil {
		res.Answer = pretty.String()
	} else {
		res.Answer = string(raw)
	}
}
