// Package webui is the self-service web UI: people sign up, add
// SftpConnections and watch their test, and make API keys that are shown
// once. It keeps no database: accounts, connections and keys are
// Kubernetes objects, each account's in a namespace of its own.
package webui

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/cmdline"
	"github.com/sftpgate/sftpgate/internal/httpedge"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/webui/accounts"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/share"
	"github.com/sftpgate/sftpgate/webui/internal/signin"
	"github.com/sftpgate/sftpgate/webui/internal/team"
	"github.com/sftpgate/sftpgate/webui/internal/tenant"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// Options configure the web UI; Run reads them from flags.
type Options struct {
	Addr string
	// Namespace holds the accounts' Secrets, and nothing else the UI may
	// read.
	Namespace string
	// GatewayURL is the gateway's base URL as clients reach it: shown in
	// endpoints and examples.
	GatewayURL string
	// GatewayInternalURL is where the UI itself reaches the gateway, for
	// "try it"; GatewayURL when empty.
	GatewayInternalURL string
	// SessionKeyFile holds the secret that signs and encrypts cookies; every
	// replica needs the same. Random (log-ins end on restart) when empty.
	SessionKeyFile string
	SecureCookies  bool
	// BcryptCost is the cost of password hashes.
	BcryptCost int
	// AuthPerMinute bounds log-ins and sign-ups per client address.
	AuthPerMinute float64
	// ServiceAccount is the UI's own, "namespace/name": what each account
	// namespace grants TenantRole to.
	ServiceAccount string
	// TrustedProxies are the addresses (CIDRs) of proxies whose
	// X-Forwarded-For tells the client's address.
	TrustedProxies string
	// SignUp lets anyone make an account; without it, only accounts an
	// operator adds (sftpgate webui add-account) log in.
	SignUp bool
	// Quota caps what each account may hold, AccountTotals what all of
	// them may run together: sign-ups stop once the accounts could pass it.
	Quota         accounts.Quota
	AccountTotals accounts.Totals
	// MaxPasswordChecks bounds the password hashes computed at once.
	MaxPasswordChecks int
	// SystemNamespace is sftpgate's own, where the audit records of the
	// accounts' actions are stored; StateBudget and Audit bound them.
	SystemNamespace string
	StateBudget     storedbytes.Limits
	Audit           audit.Bounds
	// PasswordLogin lets people log in (and sign up) with an email and a
	// password; OIDC signs them in with an OpenID provider. Either or both.
	PasswordLogin bool
	OIDC          signin.OIDCOptions
	// Log is where the web UI logs (Run: from --log-level); nil logs
	// nothing.
	Log *slog.Logger
}

// BindFlags registers the options on fs with their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Addr, "listen-address", ":8080", "Address the web UI listens on.")
	fs.StringVar(&o.Namespace, "accounts-namespace", "sftpgate-accounts",
		"Namespace of the accounts' Secrets, where the web UI may read Secrets: one of their own (config/accounts).")
	fs.StringVar(&o.GatewayURL, "gateway-url", "http://localhost:8080", "The gateway's base URL as its clients reach it, shown in endpoints and examples.")
	fs.StringVar(&o.GatewayInternalURL, "gateway-internal-url", "", "Where the web UI reaches the gateway for \"try it\" (default: --gateway-url).")
	fs.StringVar(&o.SessionKeyFile, "session-key-file", "", "File with the secret (32 bytes or more) that signs and encrypts cookies; the same for every replica. Random when empty: log-ins end on restart.")
	fs.BoolVar(&o.SecureCookies, "secure-cookies", false, "Mark cookies Secure even when requests do not say they came over TLS.")
	fs.IntVar(&o.BcryptCost, "bcrypt-cost", 12, "bcrypt cost of password hashes.")
	fs.StringVar(&o.ServiceAccount, "service-account", "sftpgate-system/sftpgate-webui",
		"The web UI's service account, namespace/name: each account's namespace grants it the "+TenantRole+" ClusterRole.")
	fs.Float64Var(&o.AuthPerMinute, "auth-per-minute", 10,
		"Log-ins and sign-ups one client address, and log-ins to one account, may try per minute (burst of the same); 0 is no limit.")
	fs.StringVar(&o.TrustedProxies, "trusted-proxies", "",
		"Comma-separated addresses or CIDRs of proxies (an ingress) whose X-Forwarded-For gives the client's address for rate limits.")
	fs.BoolVar(&o.SignUp, "signup", true,
		"Let anyone make an account. false for a private deployment: only accounts added with 'sftpgate webui add-account' log in.")
	fs.IntVar(&o.Quota.Connections, "max-connections-per-account", 25, "SftpConnections one account may have (a ResourceQuota in its namespace).")
	fs.IntVar(&o.Quota.Keys, "max-keys-per-account", 50, "ApiKeys one account may have (a ResourceQuota in its namespace).")
	fs.IntVar(&o.Quota.Secrets, "max-secrets-per-account", 50, "Secrets one account may have: a connection's credentials are one (a ResourceQuota in its namespace).")
	fs.IntVar(&o.Quota.Watches, "max-watches-per-account", 10, "SftpWatches one account may have (a ResourceQuota in its namespace).")
	fs.IntVar(&o.Quota.Transfers, "max-transfers-per-account", 50, "Transfers one account may have, finished ones included (a ResourceQuota in its namespace).")
	fs.IntVar(&o.Quota.Shares, "max-shares-per-account", 50, "ShareLinks one account may have (a ResourceQuota in its namespace; each also holds an ApiKey place).")
	fs.IntVar(&o.Quota.Members, "max-members-per-account", 50, "Members one account's team may have, people and groups (a ResourceQuota on its RoleBindings).")
	fs.IntVar(&o.Quota.Expectations, "max-expectations-per-account", 10,
		"FileExpectations one account may have (a ResourceQuota in its namespace).")
	fs.IntVar(&o.AccountTotals.Expectations, "max-account-expectations-total", 1000,
		"Expectations all accounts together may evaluate, as the worker's flag of the name (set them alike): no account is made once the accounts there are, each with --max-expectations-per-account, could have as many; 0 is no bound.")
	fs.IntVar(&o.AccountTotals.Watches, "max-account-watches-total", 1000,
		"Watches all accounts together may run, as the worker's flag of the name (set them alike): no account is made once the accounts there are, each with --max-watches-per-account, could run as many; 0 is no bound.")
	fs.StringVar(&o.SystemNamespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "sftpgate-system"),
		"sftpgate's namespace, where the audit records of what accounts do are stored.")
	o.StateBudget = storedbytes.Limits{}.WithDefaults()
	storedbytes.RegisterFlags(fs, &o.StateBudget)
	audit.RegisterFlags(fs, &o.Audit)
	fs.BoolVar(&o.PasswordLogin, "password-login", true,
		"Let people log in and sign up with an email and a password. false with --oidc-issuer: only the OpenID provider signs people in, and the log-in page goes straight to it.")
	o.OIDC.BindFlags(fs)
	fs.IntVar(&o.MaxPasswordChecks, "max-password-checks", 4,
		"Password hashes computed at once (log-ins and sign-ups; bcrypt is slow on purpose); over it, the page asks to try again.")
}

// hashWait is how long a log-in or sign-up waits for a password-check
// slot before the page asks to try again.
const hashWait = 2 * time.Second

// Server is the web UI.
type Server struct {
	handler  http.Handler
	accounts *accounts.Store
	trail    *audit.Trail
}

// ui is the web UI: its surfaces, on the shared core, and the one route
// table (route, signedInRoutes).
type ui struct {
	*team.Teams
	signin *signin.Pages
	share  *share.Pages
	tenant *tenant.Pages
	// provider is the OpenID provider's issuer, where log-out forms may
	// post.
	provider string
}

// New builds the web UI on a client of the cluster.
func New(c client.Client, opts Options) (*Server, error) {
	secret := make([]byte, 32)
	if opts.SessionKeyFile != "" {
		s, err := web.ReadSecretFile(opts.SessionKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--session-key-file: %w", err)
		}
		if secret = []byte(s); len(secret) < 32 {
			return nil, errors.New("--session-key-file: the secret must be at least 32 bytes")
		}
	} else {
		_, _ = rand.Read(secret)
	}
	if opts.BcryptCost < bcrypt.MinCost || opts.BcryptCost > bcrypt.MaxCost {
		return nil, fmt.Errorf("--bcrypt-cost must be between %d and %d", bcrypt.MinCost, bcrypt.MaxCost)
	}
	pages, err := web.ParsePages()
	if err != nil {
		return nil, err
	}
	saNamespace, saName, ok := strings.Cut(opts.ServiceAccount, "/")
	if !ok || saNamespace == "" || saName == "" {
		return nil, errors.New("--service-account must be namespace/name")
	}
	clients, err := web.ParseTrustedProxies(opts.TrustedProxies)
	if err != nil {
		return nil, err
	}
	if !opts.PasswordLogin && opts.OIDC.Issuer == "" {
		return nil, errors.New("--password-login=false needs --oidc-issuer: no one could log in")
	}
	httpClient := &http.Client{Timeout: 30 * time.Second}
	tryURL := opts.GatewayInternalURL
	if tryURL == "" {
		tryURL = opts.GatewayURL
	}
	log := logging.OrDiscard(opts.Log)
	core := &web.Core{
		Client: c,
		Accounts: &accounts.Store{Client: c, Namespace: opts.Namespace, Cost: opts.BcryptCost, TenantRole: TenantRole,
			Subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}, OwnerRole: web.ClusterRoleOf("admin"),
			Quota: opts.Quota, Totals: opts.AccountTotals, Hashes: make(chan struct{}, max(opts.MaxPasswordChecks, 1)), HashWait: hashWait},
		Quota:      opts.Quota,
		Cookies:    web.NewCookies(secret, opts.SecureCookies),
		GatewayURL: strings.TrimSuffix(opts.GatewayURL, "/"),
		TryURL:     strings.TrimSuffix(tryURL, "/"),
		Clients:    clients,
		Limits:     web.NewLimits(opts.AuthPerMinute),
		Templates:  pages,
		HTTPClient: httpClient,
		Log:        log,
	}
	// Every namespace the UI records for is an account's: its budgets are
	// the accounts' (the UI may not read namespaces to tell).
	core.Records = &auditstore.Store{Client: c, Namespace: cmp.Or(opts.SystemNamespace, "sftpgate-system"), Budget: &storedbytes.Budget{
		Client: c, Namespace: cmp.Or(opts.SystemNamespace, "sftpgate-system"), Limits: opts.StateBudget.ForAccounts()}}
	core.Trail = audit.NewTrail("webui", log).Keep(core.Records, opts.Audit)
	teams := &team.Teams{Gateway: gw.New(core, web.Derive(secret, "files"))}
	in, err := signin.New(teams, signin.Options{SignUp: opts.SignUp, PasswordLogin: opts.PasswordLogin, OIDC: opts.OIDC,
		HTTPClient: httpClient, Log: log})
	if err != nil {
		return nil, err
	}
	u := &ui{Teams: teams, signin: in, share: &share.Pages{Gateway: teams.Gateway}, tenant: &tenant.Pages{Teams: teams}, provider: opts.OIDC.Issuer}
	return &Server{handler: u.routes(), accounts: u.Accounts, trail: u.Trail}, nil
}

// Handler is the web UI's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer is an HTTP server of the handler with the web UI's timeouts
// (downloads and uploads move theirs on as they stream) and header bound;
// set its address, or serve it on a listener.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: httpedge.MaxHeaderBytes,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
}

// Start stores the audit records of what accounts do, every second,
// until Close.
func (s *Server) Start() { go s.trail.Run(context.Background()) }

// Close stores the audit records not yet stored, and closes the chains:
// once requests are answered.
func (s *Server) Close(ctx context.Context) { s.trail.Close(ctx) }

// Accounts is the web UI's store of accounts, for creating one outside a
// sign-up (the demo account of sftpgate dev).
func (s *Server) Accounts() *accounts.Store { return s.accounts }

func (u *ui) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(httpedge.RequestID, recovery.Middleware(u.ServerError))
	u.route(r)
	// Every state-changing request must come from the UI's own pages.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.Render(w, r, http.StatusForbidden, "message", web.Page{Title: "Refused",
			Message: "This form was sent from another site, so it was refused. Open sftpgate yourself and try again there."})
	}))
	// Security headers outside, so that the refusal has them too.
	return securityHeaders(u.provider, csrf.Handler(r))
}

// route registers the UI's routes on r: those anyone may use here, those
// behind the log-in from signedInRoutes.
func (u *ui) route(r chi.Router) {
	signedIn := u.signedInRoutes()
	// Uploads stream through to the gateway, which bounds them; every
	// other body is a form, and small.
	for _, row := range signedIn {
		if row.method == tusMethods {
			r.With(u.signin.RequireAccount).Handle(row.pattern, u.signedIn(row))
		}
	}
	r.Handle("/s/{token}/uploads/*", u.Serve(u.AuditedUploads("share.upload", web.UploadPath, u.share.ShareRoute(u.share.ShareUploads))))
	r.Group(func(r chi.Router) {
		r.Use(limitBodies)
		static, _ := fs.Sub(web.Assets, "static")
		r.Handle("/static/*", http.StripPrefix("/static/", cacheFor(time.Hour, http.FileServerFS(static))))
		r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		r.NotFound(func(w http.ResponseWriter, r *http.Request) { u.NotFound(w, r) })

		r.Get("/", u.Serve(u.signin.Home))
		r.Get("/signup", u.Serve(u.signin.SignUpForm))
		r.Post("/signup", u.Limited(u.Serve(u.Audited("signup", nil, u.signin.SignUp))))
		r.Get("/login", u.Serve(u.signin.LogInForm))
		r.Post("/login", u.Serve(u.Audited("login", nil, u.signin.LogIn)))
		r.Post("/logout", u.Serve(u.Audited("logout", nil, u.signin.LogOut)))
		r.Get("/logged-out", u.Serve(u.signin.LoggedOut))
		r.Get("/s/{token}", u.Serve(u.Audited("share.open", web.SharePath, u.share.ShareRoute(u.share.ServeShare))))
		r.Post("/s/{token}", u.Serve(u.Audited("share.password", nil, u.share.ShareRoute(u.share.ServeShare))))
		if u.provider != "" {
			r.Get("/login/oidc", u.Serve(u.signin.StartOIDC))
			r.Get("/login/oidc/callback", u.Limited(u.Serve(u.Audited("login", nil, u.signin.FinishOIDC))))
		}

		r.Group(func(r chi.Router) {
			r.Use(u.signin.RequireAccount)
			for _, row := range signedIn {
				if row.method != tusMethods {
					r.Method(row.method, row.pattern, u.signedIn(row))
				}
			}
		})
	})
}

// signedInRoute is a route behind the log-in: what RBAC must grant the
// person in the team they act in (need: the permission may asks for),
// and the action its audit record names ("": none), with what the
// request names.
type signedInRoute struct {
	method, pattern string
	need            team.Permission
	action          string
	what            web.What
	serve           web.PageFunc
}

// tusMethods is the method of a tus endpoint: each of the protocol's,
// with bodies that stream (no limitBodies); only a creation (POST) is
// recorded, its parts being the gateway's records.
const tusMethods = "tus"

// noPermission is the need of a page that asks RBAC nothing itself: the
// person's own (their teams), whatever their role in the team they act
// in. Switching asks RBAC for a role in the team switched to.
var noPermission = team.Permission{Verb: "none"}

// signedInRoutes is every route behind the log-in, each with what it
// needs (TestSignedInRoutesNeedPermissions: no route without one).
func (u *ui) signedInRoutes() []signedInRoute {
	get, post, conn := http.MethodGet, http.MethodPost, u.tenant.WithConnection
	on := web.OnEndpoint(v1alpha1.KindSftpConnection)
	routes := []signedInRoute{
		{get, "/connections", team.SeeConnections, "", nil, u.tenant.ListConnections},
		{get, "/connections/new", team.CreateConnections, "", nil, u.tenant.NewConnection},
		{post, "/connections", team.CreateConnections, "connection.create", web.FormNamed("SftpConnection", "name"), u.tenant.CreateConnection},
		{get, "/connections/{name}", team.SeeConnections, "", nil, conn(u.tenant.ShowConnection)},
		{get, "/connections/{name}/edit", team.UpdateConnections, "", nil, conn(u.tenant.EditConnection)},
		{post, "/connections/{name}/edit", team.UpdateConnections, "connection.update", web.All(on, web.URLNamed("SftpConnection", "name")), conn(u.tenant.UpdateConnection)},
		{get, "/connections/{name}/delete", team.DeleteConnections, "", nil, conn(u.tenant.ConfirmDeleteConnection)},
		{post, "/connections/{name}/delete", team.DeleteConnections, "connection.delete", web.All(on, web.URLNamed("SftpConnection", "name")), conn(u.tenant.DeleteConnection)},
		{post, "/connections/{name}/try", team.ReadFiles, "connection.try", on, conn(u.tenant.TryIt)},
		{get, "/connections/{name}/watches/new", team.CreateWatches, "", nil, conn(u.tenant.NewWatchForm)},
		{post, "/connections/{name}/watches", team.CreateWatches, "watch.create", web.All(on, web.FormPath), conn(u.tenant.CreateWatch)},
		{get, "/connections/{name}/watches/{watch}/delete", team.DeleteWatches, "", nil, conn(u.tenant.ConfirmDeleteWatch)},
		{post, "/connections/{name}/watches/{watch}/delete", team.DeleteWatches, "watch.delete", web.All(on, web.URLNamed("SftpWatch", "watch")), conn(u.tenant.DeleteWatch)},
		{get, "/transfers", team.SeeTransfers, "", nil, u.tenant.ListTransfers},
		{get, "/transfers/new", team.CreateTransfers, "", nil, u.tenant.NewTransferForm},
		{post, "/transfers", team.CreateTransfers, "transfer.create", nil, u.tenant.CreateTransfer},
		{get, "/transfers/{name}/delete", team.DeleteTransfers, "", nil, u.tenant.ConfirmDeleteTransfer},
		{post, "/transfers/{name}/delete", team.DeleteTransfers, "transfer.delete", web.URLNamed("Transfer", "name"), u.tenant.DeleteTransfer},
		{get, "/expectations", team.SeeExpectations, "", nil, u.tenant.ListExpectations},
		{get, "/expectations/new", team.CreateExpectations, "", nil, u.tenant.NewExpectationForm},
		{post, "/expectations", team.CreateExpectations, "expectation.create", web.All(web.FormConnection("connection"), web.FormPath), u.tenant.CreateExpectation},
		{get, "/expectations/{name}", team.SeeExpectations, "", nil, u.tenant.ShowExpectation},
		{get, "/expectations/{name}/delete", team.DeleteExpectations, "", nil, u.tenant.ConfirmDeleteExpectation},
		{post, "/expectations/{name}/delete", team.DeleteExpectations, "expectation.delete", web.URLNamed("FileExpectation", "name"), u.tenant.DeleteExpectation},
		{get, "/openpgp", team.ManageOpenPGPKeys, "", nil, u.tenant.ListOpenPGPKeys},
		{post, "/openpgp", team.CreateOpenPGPKeys, "openpgp.create", web.FormNamed("Secret", "name"), u.tenant.UploadOpenPGPKey},
		{get, "/openpgp/{name}/delete", team.DeleteOpenPGPKeys, "", nil, u.tenant.ConfirmDeleteOpenPGPKey},
		{post, "/openpgp/{name}/delete", team.DeleteOpenPGPKeys, "openpgp.delete", web.URLNamed("Secret", "name"), u.tenant.DeleteOpenPGPKey},
		{get, "/keys", team.ManageKeys, "", nil, u.tenant.ListKeys},
		{get, "/keys/new", team.CreateKeys, "", nil, u.tenant.NewKeyForm},
		{post, "/keys", team.CreateKeys, "key.create", nil, u.tenant.CreateKey},
		{get, "/keys/{name}/created", team.CreateKeys, "", nil, u.tenant.ShowNewKey},
		{get, "/keys/{name}/revoke", team.DeleteKeys, "", nil, u.tenant.ConfirmRevokeKey},
		{post, "/keys/{name}/revoke", team.DeleteKeys, "key.revoke", web.URLNamed("ApiKey", "name"), u.tenant.RevokeKey},
		{get, "/activity", team.SeeActivity, "", nil, u.tenant.ShowActivity},
		{get, "/members", team.SeeMembers, "", nil, u.tenant.ListMembers},
		{post, "/members", team.AddMembers, "member.add", nil, u.tenant.AddMember},
		{get, "/members/{name}/remove", team.RemoveMembers, "", nil, u.tenant.ConfirmRemoveMember},
		{post, "/members/{name}/remove", team.RemoveMembers, "member.remove", web.URLNamed("RoleBinding", "name"), u.tenant.RemoveMember},
		{get, "/shares", team.SeeShares, "", nil, u.tenant.ListShares},
		{get, "/shares/{name}/created", team.CreateShares, "", nil, u.tenant.ShowNewShare},
		{get, "/shares/{name}/delete", team.DeleteShares, "", nil, u.tenant.ConfirmDeleteShare},
		{post, "/shares/{name}/delete", team.DeleteShares, "share.delete", web.URLNamed("ShareLink", "name"), u.tenant.DeleteShare},
		{get, "/teams", noPermission, "", nil, u.tenant.ListTeams},
		{post, "/teams", noPermission, "team.switch", nil, u.tenant.SwitchTeam},
		{post, "/teams/own", noPermission, "team.create", nil, u.tenant.MakeOwnTeam},
		{post, "/members/team-name", team.NameTeam, "team.rename", nil, u.tenant.RenameTeam},
	}
	for _, k := range tenant.EndpointKinds {
		routes = append(routes, u.fileRoutes(k)...)
	}
	return routes
}

// fileRoutes are the routes of the files of kind k's objects: the file
// browser, its uploads, and the share links made from it.
func (u *ui) fileRoutes(k *tenant.EndpointKind) []signedInRoute {
	get, post, at := http.MethodGet, http.MethodPost, "/"+k.Path+"/{name}"
	files, on, e := team.FilesOf(k.Resource), web.OnEndpoint(k.Kind), func(fn func(http.ResponseWriter, *http.Request, v1alpha1.Endpoint) error) web.PageFunc {
		return u.tenant.WithEndpoint(k.Kind, fn)
	}
	return []signedInRoute{
		{tusMethods, at + "/uploads/*", files.Write, "file.upload", web.All(on, web.UploadPath), e(u.tenant.UploadProxy)},
		{get, at + "/status", team.SeeOf(k.Resource), "", nil, e(u.tenant.EndpointStatus)},
		{get, at + "/files", files.Read, "file.list", web.All(on, web.QueryPath), e(u.tenant.Folder)},
		{get, at + "/files/view", files.Read, "file.view", web.All(on, web.QueryPath), e(u.tenant.ShowFile)},
		{get, at + "/files/download", files.Read, "file.download", web.All(on, web.QueryPath), e(u.tenant.Download)},
		{post, at + "/files/mkdir", files.Write, "file.mkdir", web.All(on, web.NewFolderPath), e(u.tenant.NewFolder)},
		{post, at + "/files/rename", files.Rename, "file.rename", web.All(on, web.RenamePaths), e(u.tenant.Rename)},
		{get, at + "/files/delete", files.Delete, "", nil, e(u.tenant.ConfirmDelete)},
		{post, at + "/files/delete", files.Delete, "file.delete", web.All(on, web.FormPath), e(u.tenant.DeleteEntry)},
		{get, at + "/shares/new", team.CreateShares, "", nil, e(u.tenant.NewShareForm)},
		{post, at + "/shares", team.CreateShares, "share.create", on, e(u.tenant.CreateShare)},
	}
}

// signedIn is row's handler: what it needs asked of RBAC first (may), and
// all of it recorded.
func (u *ui) signedIn(row signedInRoute) http.HandlerFunc {
	h := row.serve
	if row.need != noPermission {
		h = u.May(row.need, h)
	}
	switch {
	case row.action == "":
	case row.method == tusMethods:
		h = u.AuditedUploads(row.action, row.what, h)
	default:
		h = u.Audited(row.action, row.what, h)
	}
	return u.Serve(h)
}

// securityHeaders: no inline script, no framing, no sniffing. Forms
// post here only, or (logging out, which goes on to end the session
// there) to the OpenID provider.
func securityHeaders(provider string, next http.Handler) http.Handler {
	formAction := "'self'"
	if u, err := url.Parse(provider); err == nil && u.Host != "" {
		formAction += " " + u.Scheme + "://" + u.Host
	}
	csp := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// maxBody bounds a request body: the largest form holds a private key
// file of up to maxKeyFile.
const maxBody = tenant.MaxKeyFile + 64<<10

func limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

func cacheFor(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		next.ServeHTTP(w, r)
	})
}

// Run runs "sftpgate webui" until ctx ends; "sftpgate webui add-account"
// adds an account (AddAccount).
func Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "add-account" {
		return AddAccount(ctx, args[1:], os.Stdin, os.Stdout)
	}
	fs := flag.NewFlagSet("webui", flag.ContinueOnError)
	var opts Options
	opts.BindFlags(fs)
	started, err := cmdline.Parse("webui", fs, args, nil)
	if err != nil {
		return err
	}
	defer started.Flush()
	log := started.Log
	opts.Log = log
	s, err := NewForConfig(started.Config, opts)
	if err != nil {
		return err
	}
	if opts.SessionKeyFile == "" {
		log.Warn("no --session-key-file: log-ins end when the web UI restarts, and replicas do not share them")
	}
	srv := s.HTTPServer()
	srv.Addr = opts.Addr
	s.Start()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("web UI listening", "address", opts.Addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	s.Close(shutdownCtx)
	return err
}

// NewForConfig is New with a client of the cluster of restConfig.
func NewForConfig(restConfig *rest.Config, opts Options) (*Server, error) {
	c, err := client.New(restConfig, client.Options{Scheme: api.Scheme()})
	if err != nil {
		return nil, err
	}
	return New(c, opts)
}

// OpenPGPKeySecret makes the Secret that keeps an OpenPGP key as the
// OpenPGP keys page makes it (tenant.OpenPGPKeySecret), for the demo's
// keys.
func OpenPGPKeySecret(ns, name string, key, passphrase []byte) (*corev1.Secret, error) {
	return tenant.OpenPGPKeySecret(ns, name, key, passphrase)
}
