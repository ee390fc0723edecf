package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// What the scale bench reads of the control plane: the API server's
// requests and lists by resource (its /metrics, as the admin), and
// etcd's database (its own /metrics, on its client URL).

// controlPlaneProbe reads the metrics of the bench's API server and etcd.
type controlPlaneProbe struct {
	api, etcd   string
	apiClient   *http.Client
	etcdClient  *http.Client
	readTimeout time.Duration
}

func newControlPlaneProbe(env *envtest.Environment) (*controlPlaneProbe, error) {
	apiClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		return nil, err
	}
	api, err := url.JoinPath(env.Config.Host, "metrics") // Host may end in a slash
	if err != nil {
		return nil, err
	}
	if env.ControlPlane.Etcd == nil || env.ControlPlane.Etcd.URL == nil {
		return nil, errors.New("the control plane has no etcd URL")
	}
	etcd := env.ControlPlane.Etcd.URL.JoinPath("metrics").String()
	return &controlPlaneProbe{api: api, etcd: etcd, apiClient: apiClient, etcdClient: &http.Client{}, readTimeout: time.Minute}, nil
}

// writeKey is what a write was for, as the API server counts requests:
// its resource, subresource and verb.
type writeKey struct{ resource, subresource, verb string }

func (k writeKey) String() string {
	if k.subresource != "" {
		return k.resource + "/" + k.subresource + " " + k.verb
	}
	return k.resource + " " + k.verb
}

// listKey is a resource's lists by where the API server served them from
// (its storage label: etcd or watchcache).
type listKey struct{ resource, storage string }

// apiCounts is what the API server has answered since it started.
type apiCounts struct {
	// writes by what they were for, and of them the conflicts (409).
	writes, conflicts map[writeKey]float64
	// fetched is apiserver_storage_list_fetched_objects_total of the
	// configmaps and the sftpwatches: the objects read to serve lists.
	fetched map[listKey]float64
}

// writeVerbs are apiserver_request_total's verbs that change something.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true,
	"CREATE": true, "UPDATE": true}

// listedResources are the resources whose list costs the bench prints.
var listedResources = map[string]string{"configmaps": "configmaps", "sftpwatches": "sftpwatches", "sftpwatches.sftpgate.dev": "sftpwatches"}

// apiCounts reads the API server's counters.
func (p *controlPlaneProbe) apiCounts(ctx context.Context) (apiCounts, error) {
	c := apiCounts{writes: map[writeKey]float64{}, conflicts: map[writeKey]float64{}, fetched: map[listKey]float64{}}
	err := p.read(ctx, p.apiClient, p.api, func(name string, labels map[string]string, v float64) {
		switch name {
		case "apiserver_request_total":
			if !writeVerbs[labels["verb"]] {
				return
			}
			k := writeKey{labels["resource"], labels["subresource"], labels["verb"]}
			c.writes[k] += v
			if labels["code"] == "409" {
				c.conflicts[k] += v
			}
		case "apiserver_storage_list_fetched_objects_total":
			if r, ok := listedResources[labels["resource"]]; ok {
				c.fetched[listKey{r, labels["storage"]}] += v
			}
		}
	})
	return c, err
}

// since is what the API server answered between then and c.
func (c apiCounts) since(then apiCounts) apiCounts {
	d := apiCounts{writes: map[writeKey]float64{}, conflicts: map[writeKey]float64{}, fetched: map[listKey]float64{}}
	for k, v := range c.writes {
		d.writes[k] = v - then.writes[k]
	}
	for k, v := range c.conflicts {
		d.conflicts[k] = v - then.conflicts[k]
	}
	for k, v := range c.fetched {
		d.fetched[k] = v - then.fetched[k]
	}
	return d
}

// total is all the writes; of resources other than except.
func (c apiCounts) total(except ...string) float64 {
	sum := 0.0
	for k, v := range c.writes {
		if !slices.Contains(except, k.resource) {
			sum += v
		}
	}
	return sum
}

// resource is the writes to one resource.
func (c apiCounts) resource(name string) float64 {
	sum := 0.0
	for k, v := range c.writes {
		if k.resource == name {
			sum += v
		}
	}
	return sum
}

// etcdDB is etcd's database: its size on disk (what counts against its
// quota, and never shrinks without a defragmentation) and what of it
// holds live revisions, with how many compactions etcd has finished.
type etcdDB struct {
	total, inUse, compactions float64
}

func (p *controlPlaneProbe) etcdDB(ctx context.Context) (etcdDB, error) {
	var db etcdDB
	err := p.read(ctx, p.etcdClient, p.etcd, func(name string, _ map[string]string, v float64) {
		switch name {
		case "etcd_mvcc_db_total_size_in_bytes":
			db.total = v
		case "etcd_mvcc_db_total_size_in_use_in_bytes":
			db.inUse = v
		case "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count":
			db.compactions = v
		}
	})
	if err == nil && db.total == 0 {
		err = errors.New("etcd's metrics have no etcd_mvcc_db_total_size_in_bytes")
	}
	return db, err
}

// afterCompaction waits until etcd finished a compaction (the API server
// asks for one every 5 minutes, of the revisions older than the last) past
// the count of since, and returns the database then; past deadline it
// returns the database as it is, with false.
func (p *controlPlaneProbe) afterCompaction(ctx context.Context, since etcdDB, deadline time.Duration) (etcdDB, bool, error) {
	for end := time.Now().Add(deadline); ; {
		db, err := p.etcdDB(ctx)
		if err == nil && db.compactions > since.compactions {
			return db, true, nil
		}
		if time.Now().After(end) {
			return db, false, err
		}
		select {
		case <-ctx.Done():
			return db, false, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// read reads a Prometheus text page and hands each sample to each.
func (p *controlPlaneProbe) read(ctx context.Context, c *http.Client, u string, each func(name string, labels map[string]string, v float64)) error {
	ctx, cancel := context.WithTimeout(ctx, p.readTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return parseMetrics(resp.Body, each)
}

// parseMetrics reads Prometheus' text format: each sample's name, labels
// and value (its timestamp, if any, ignored).
func parseMetrics(r io.Reader, each func(name string, labels map[string]string, v float64)) error {
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			return fmt.Errorf("a sample without a value: %q", line)
		}
		name, rest := line[:end], line[end:]
		var labels map[string]string
		if rest[0] == '{' {
			var err error
			if labels, rest, err = parseLabels(rest[1:]); err != nil {
				return fmt.Errorf("%w: %q", err, line)
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return fmt.Errorf("a sample without a value: %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return fmt.Errorf("%w: %q", err, line)
		}
		each(name, labels, v)
	}
	return lines.Err()
}

// parseLabels reads `name="value",...}` and returns what follows it.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq < 0 {
			return nil, "", errors.New("a label without a quoted value")
		}
		name := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		for i := 0; ; i++ {
			if i >= len(s) {
				return nil, "", errors.New("a label value without its end")
			}
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[i])
				}
				continue
			}
			if s[i] == '"' {
				s = s[i+1:]
				break
			}
			v.WriteByte(s[i])
		}
		labels[name] = v.String()
	}
}

// transferEventWrites is how many writes the events in the transfers'
// namespaces took: one to create each, and one more for each that
// became a series (client-go's events library patches a series on
// its second occurrence, then every 30 minutes). The API server counts
// every namespace's events as one resource; the transfers' are counted
// from their objects, so that a watch's writes exclude them.
func transferEventWrites(ctx context.Context, k8s client.Client, namespaces []string) (int, error) {
	n := 0
	for _, ns := range namespaces {
		for cont := ""; ; {
			var page corev1.EventList
			if err := k8s.List(ctx, &page, client.InNamespace(ns), client.Limit(scaleListPage), client.Continue(cont)); err != nil {
				return 0, err
			}
			for i := range page.Items {
				n++
				if page.Items[i].Series != nil {
					n++
				}
			}
			if cont = page.Continue; cont == "" {
				break
			}
		}
	}
	return n, nil
}

// sortedWriteKeys are the keys with writes in any of counts, by resource,
// subresource and verb.
func sortedWriteKeys(counts ...apiCounts) []writeKey {
	seen := map[writeKey]bool{}
	for _, c := range counts {
		for k, v := range c.writes {
			if v > 0 {
				seen[k] = true
			}
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(a, b writeKey) int {
		return strings.Compare(a.resource+"\x00"+a.subresource+"\x00"+a.verb, b.resource+"\x00"+b.subresource+"\x00"+b.verb)
	})
}

// thousands writes n with a comma between each three digits.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// megabytes is b in MB (10^6 bytes), as the targets are.
func megabytes(b float64) string { return thousands(int(b/1e6)) + " MB" }

// minutes writes d in seconds, minutes and seconds, or hours and minutes.
func minutes(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
}
