package watches

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// EventTypePrefix starts every event type: dev.sftpgate.file.created,
// .modified, .deleted.
const EventTypePrefix = "dev.sftpgate.file."

// EventID is a change's CloudEvent id: the same for the same watch, type,
// file, size and modification time, on every try and after a restart or a
// move to another replica, so that receivers can drop repeats.
func EventID(watchUID types.UID, e watch.Event) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d\x00%d", watchUID, e.Type, e.Path, e.Size, e.ModTime))
	return hex.EncodeToString(sum[:16])
}

// Data is an event's data, as JSON.
type Data struct {
	// Path is the file's path below the connection's root, as the
	// gateway's commands name it.
	Path string `json:"path"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Modified is the file's modification time, as the server said.
	Modified time.Time `json:"modified"`
	// Connection and Slug name the connection: its name, and where the
	// gateway serves it, to read the file with.
	Connection string `json:"connection"`
	Slug       string `json:"slug,omitempty"`
	// Watch names the watch that saw it.
	Watch string `json:"watch"`
}

// CloudEvent is p as the event sent for it. Its source names the
// connection, its subject the file's path.
func CloudEvent(w *v1alpha1.SftpWatch, conn *ends.End, p watch.Pending) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(p.ID)
	e.SetType(EventTypePrefix + strings.ToLower(string(p.Type)))
	e.SetSource(fmt.Sprintf("/apis/%s/namespaces/%s/%s/%s", v1alpha1.GroupVersion, w.Namespace, conn.Resource(), conn.Ref.Name))
	full := path.Join(w.Spec.Path, p.Path)
	e.SetSubject(full)
	e.SetTime(p.Observed)
	data, err := json.Marshal(Data{Path: full, Name: path.Base(p.Path), Size: p.Size, Modified: time.Unix(p.ModTime, 0).UTC(),
		Connection: conn.Ref.Name, Slug: conn.Slug(), Watch: w.Name})
	if err != nil {
		return e, err
	}
	return e, e.SetData(cloudevents.ApplicationJSON, data)
}
