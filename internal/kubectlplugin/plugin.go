// Package kubectlplugin is `kubectl sftpgate`: the sftpgate binary run as
// kubectl-sftpgate (a link or a copy of it by that name on the PATH), or
// as `sftpgate kubectl`. Its commands read and write sftpgate's objects
// with the user's kubeconfig, as kubectl does: status (what is not
// Ready), test (a connection tested now), events (what a watch
// delivers), audit verify (a namespace's stored trail) and share (a
// share link, its URL printed once).
package kubectlplugin

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
)

const usage = `Usage: kubectl sftpgate <command> [flags]

Commands:
  status                     every sftpgate object of the namespace (-A: of all) that is not Ready, with its reason
  test <connection>          test a connection now (--kind FtpConnection or ObjectStore for those) and wait for the result
  events <watch>             follow what a watch delivers: its counts and its Kubernetes events (--for to stop)
  audit verify               check the namespace's stored audit trail, chain by chain
  share <connection> <path>  make a share link (--mode Upload for a drop box) and print its URL once

Flags of every command: --kubeconfig, --context, -n/--namespace.
`

// Run runs the plugin's command of args, writing to out.
func Run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("kubectl sftpgate", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, usage) }
	var c cli
	c.out = out
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "The kubeconfig file (default: $KUBECONFIG, or ~/.kube/config).")
	fs.StringVar(&c.context, "context", "", "The kubeconfig context.")
	fs.StringVar(&c.namespace, "namespace", "", "The namespace (default: the context's).")
	fs.StringVar(&c.namespace, "n", "", "The namespace (short for --namespace).")
	all := fs.Bool("A", false, "status: every namespace.")
	kind := fs.String("kind", v1alpha1.KindSftpConnection, "test: the connection's kind: SftpConnection, FtpConnection or ObjectStore.")
	timeout := fs.Duration("timeout", 2*time.Minute, "test: how long to wait for the result.")
	follow := fs.Duration("for", 0, "events: how long to follow (0: until interrupted).")
	mode := fs.String("mode", string(v1alpha1.ShareDownload), "share: Download or Upload.")
	expires := fs.Duration("expires", 7*24*time.Hour, "share: how long the link works.")
	base := fs.String("url", "", "share: the web UI's address, to print the whole link (default: its path alone).")
	systemNamespace := fs.String("system-namespace", "sftpgate-system", "audit verify: sftpgate's namespace, where the trail is stored.")
	command, flags := splitArgs(args)
	if err := fs.Parse(flags); err != nil {
		return err
	}
	operands := command[min(len(command), 1):]
	if len(command) == 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	if err := c.connect(); err != nil {
		return err
	}
	switch command[0] {
	case "status":
		return c.status(ctx, *all)
	case "test":
		if len(operands) != 1 {
			return errors.New("usage: kubectl sftpgate test <connection> [--kind K]")
		}
		return c.test(ctx, *kind, operands[0], *timeout)
	case "events":
		if len(operands) != 1 {
			return errors.New("usage: kubectl sftpgate events <watch>")
		}
		return c.events(ctx, operands[0], *follow)
	case "audit":
		if len(operands) != 1 || operands[0] != "verify" {
			return errors.New("usage: kubectl sftpgate audit verify")
		}
		return c.auditVerify(ctx, *systemNamespace)
	case "share":
		if len(operands) != 2 {
			return errors.New("usage: kubectl sftpgate share <connection> <path>")
		}
		return c.share(ctx, operands[0], operands[1], v1alpha1.ShareMode(*mode), *expires, *base)
	}
	fs.Usage()
	return fmt.Errorf("unknown command %q", command[0])
}

// splitArgs separates the command and its operands from the flags,
// which may come anywhere, as with kubectl: a flag without "=" takes the
// next word as its value, but -A, the one without a value.
func splitArgs(args []string) (command, flags []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case !strings.HasPrefix(a, "-") || a == "-":
			command = append(command, a)
		case a == "--":
			command = append(command, args[i+1:]...)
			return command, flags
		default:
			flags = append(flags, a)
			if !strings.Contains(a, "=") && strings.TrimLeft(a, "-") != "A" && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return command, flags
}

// cli is a run of the plugin: the user's client and namespace.
type cli struct {
	out                            io.Writer
	kubeconfig, context, namespace string
	k8s                            client.Client
}

func (c *cli) connect() error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	config := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
	rest, err := config.ClientConfig()
	if err != nil {
		return err
	}
	if c.namespace == "" {
		if c.namespace, _, err = config.Namespace(); err != nil {
			return err
		}
	}
	c.k8s, err = client.New(rest, client.Options{Scheme: api.Scheme()})
	return err
}

// conditioned is an sftpgate object with conditions.
type conditioned interface {
	client.Object
	GetConditions() *[]metav1.Condition
}

// status prints each object of every sftpgate kind with conditions whose
// Ready is not True for its current generation.
func (c *cli) status(ctx context.Context, all bool) error {
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(c.namespace))
	}
	scheme := api.Scheme()
	var kinds []string
	for gvk := range scheme.AllKnownTypes() {
		if gvk.GroupVersion() == v1alpha1.GroupVersion && !strings.HasSuffix(gvk.Kind, "List") {
			kinds = append(kinds, gvk.Kind)
		}
	}
	slices.Sort(kinds)
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tNAMESPACE\tNAME\tREADY\tREASON\tMESSAGE")
	rows := 0
	var skipped []string
	for _, kind := range kinds {
		o, err := scheme.New(v1alpha1.GroupVersion.WithKind(kind + "List"))
		list, ok := o.(client.ObjectList)
		if err != nil || !ok {
			continue
		}
		if err := c.k8s.List(ctx, list, opts...); err != nil {
			// A kind the user may not list is said, and the rest listed.
			skipped = append(skipped, fmt.Sprintf("%s (%s)", kind, cut(err.Error(), 80)))
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			obj, ok := item.(conditioned)
			if !ok {
				break // a kind without conditions (HolidayCalendar)
			}
			ready := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
			state, reason, message := "Unknown", "", "not seen by its controller yet"
			if ready != nil && ready.ObservedGeneration == obj.GetGeneration() {
				state, reason, message = string(ready.Status), ready.Reason, ready.Message
			}
			if state == string(metav1.ConditionTrue) {
				continue
			}
			rows++
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", kind, obj.GetNamespace(), obj.GetName(), state, reason, cut(message, 100))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if rows == 0 && len(skipped) == 0 {
		fmt.Fprintln(c.out, "Every sftpgate object is Ready.")
	}
	for _, s := range skipped {
		fmt.Fprintf(c.out, "Not listed: %s\n", s)
	}
	return nil
}

// cut is s on one line, without control characters (a server's or a
// sink's words reach the terminal), at most n characters.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// test asks the controller to test a connection now, as the web UI's
// Test button does, and waits for a test that began after the asking.
func (c *cli) test(ctx context.Context, kind, name string, timeout time.Duration) error {
	obj, ok := v1alpha1.NewEndpoint(kind)
	if !ok {
		return fmt.Errorf("%s is not a kind of connection: SftpConnection, FtpConnection or ObjectStore", kind)
	}
	key := client.ObjectKey{Namespace: c.namespace, Name: name}
	if err := c.k8s.Get(ctx, key, obj); err != nil {
		return err
	}
	asked := time.Now().UTC().Format(time.RFC3339Nano)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationTestRequestedAt, asked)
	if err := c.k8s.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "Testing %s %s/%s…\n", kind, c.namespace, name)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := c.k8s.Get(ctx, key, obj); err != nil {
			return err
		}
		// The controller says which request its last test answered.
		if obj.GetTestStatus().LastHandledTestRequest == asked {
			ready := meta.FindStatusCondition(*obj.GetConditions(), v1alpha1.ConditionReady)
			if ready != nil && ready.ObservedGeneration == obj.GetGeneration() && ready.Status != metav1.ConditionUnknown {
				fmt.Fprintf(c.out, "Ready: %s (%s) %s\n", ready.Status, ready.Reason, cut(ready.Message, 300))
				if ready.Status != metav1.ConditionTrue {
					return fmt.Errorf("the test failed: %s", ready.Reason)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no result within %s: the manager may be busy or down, or the connection waits out its backoff after failed tests (status.failedTests: %d)",
				timeout, obj.GetTestStatus().FailedTests)
		case <-time.After(time.Second):
		}
	}
}

// events prints a watch's counts and its Kubernetes events, then what
// changes, every two seconds, for d (or until ctx ends).
func (c *cli) events(ctx context.Context, name string, d time.Duration) error {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	key := client.ObjectKey{Namespace: c.namespace, Name: name}
	var was v1alpha1.SftpWatchStatus
	seen := map[string]bool{}
	first := true
	for {
		var w v1alpha1.SftpWatch
		if err := c.k8s.Get(ctx, key, &w); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		st := w.Status
		if first || st.Delivered != was.Delivered || st.Pending != was.Pending || st.DeadLettered != was.DeadLettered ||
			st.Failed != was.Failed || st.Transfers.Started != was.Transfers.Started {
			fmt.Fprintf(c.out, "%s  delivered %d (+%d), pending %d, failed tries %d, dead-lettered %d, transfers %d\n",
				time.Now().Format(time.TimeOnly), st.Delivered, st.Delivered-was.Delivered, st.Pending, st.Failed, st.DeadLettered, st.Transfers.Started)
		}
		was, first = st, false
		if err := c.printEvents(ctx, &w, seen); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

// printEvents prints the Kubernetes events about obj not printed before:
// the API server picks them out of the namespace's.
func (c *cli) printEvents(ctx context.Context, obj client.Object, seen map[string]bool) error {
	var list eventsv1.EventList
	if err := c.k8s.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"regarding.uid": string(obj.GetUID())}); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.UID != obj.GetUID() || seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		fmt.Fprintf(c.out, "%s  %s %s: %s\n", at.Format(time.TimeOnly), e.Type, e.Reason, cut(e.Note, 300))
	}
	return nil
}

// auditVerify reads the namespace's stored audit records and checks
// them as `sftpgate audit verify` checks exported ones, each chain from
// its oldest stored record: the older ones were delivered and removed.
func (c *cli) auditVerify(ctx context.Context, systemNamespace string) error {
	store := &auditstore.Store{Client: c.k8s, Reader: c.k8s, Namespace: systemNamespace}
	segments, err := store.List(ctx, c.namespace)
	if err != nil {
		return err
	}
	var records []audit.Record
	for _, seg := range segments {
		got, _, err := store.Read(ctx, seg)
		if err != nil {
			return err
		}
		records = append(records, got...)
	}
	if len(records) == 0 {
		fmt.Fprintf(c.out, "No audit records are stored for %s.\n", c.namespace)
		return nil
	}
	return audit.WriteReport(c.out, records, audit.Unreadable{}, true)
}

// share makes a ShareLink of path on connection and prints its link: the
// token is printed this once, and only its hash is kept.
func (c *cli) share(ctx context.Context, connection, path string, mode v1alpha1.ShareMode, expires time.Duration, base string) error {
	// The token names the link, so the name comes first.
	name := "share-" + strings.ToLower(rand.Text()[:10])
	link := &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: name},
		Spec: v1alpha1.ShareLinkSpec{Connection: connection, Path: path, Mode: mode, ExpiresAt: &metav1.Time{Time: time.Now().Add(expires).UTC().Truncate(time.Second)}}}
	token := v1alpha1.NewShareToken(link.Namespace, link.Name)
	sum := sha256.Sum256([]byte(token))
	link.Spec.TokenSHA256 = hex.EncodeToString(sum[:])
	if err := c.k8s.Create(ctx, link); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "ShareLink %s/%s: %s of %s on %s, until %s.\n", link.Namespace, link.Name, strings.ToLower(string(cmp.Or(mode, v1alpha1.ShareDownload))),
		path, connection, link.Spec.ExpiresAt.Format(time.RFC3339))
	fmt.Fprintf(c.out, "Its link, shown this once:\n%s/s/%s\n", strings.TrimSuffix(base, "/"), token)
	return nil
}
