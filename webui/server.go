// Package webui is the self-service web UI: people sign up, add
// SftpConnections and watch their test, and make API keys that are shown
// once. It keeps no database: accounts, connections and keys are
// Kubernetes objects, each account's in a namespace of its own.
package webui

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/crypto/bcrypt"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/internal/auditstore"
	"github.com/sftpgate/sftpgate/internal/cmdline"
	"github.com/sftpgate/sftpgate/internal/httpedge"
	"github.com/sftpgate/sftpgate/internal/logging"
	"github.com/sftpgate/sftpgate/internal/ratelimit"
	"github.com/sftpgate/sftpgate/internal/recovery"
	"github.com/sftpgate/sftpgate/internal/storedbytes"
	"github.com/sftpgate/sftpgate/webui/accounts"
)

//go:embed templates static
var assets embed.FS

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
	OIDC          OIDCOptions
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
	fs.IntVar(&o.AccountTotals.Watches, "max-account-watches-total", 1000,
		"Watches all accounts together may run, as the worker's flag of the name (set them alike): no account is made once the accounts there are, each with --max-watches-per-account, could run as many; 0 is no bound.")
	fs.StringVar(&o.SystemNamespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "sftpgate-system"),
		"sftpgate's namespace, where the audit records of what accounts do are stored.")
	o.StateBudget = storedbytes.Limits{}.WithDefaults()
	storedbytes.RegisterFlags(fs, &o.StateBudget)
	audit.RegisterFlags(fs, &o.Audit)
	fs.BoolVar(&o.PasswordLogin, "password-login", true,
		"Let people log in and sign up with an email and a password. false with --oidc-issuer: only the OpenID provider signs people in, and the log-in page goes straight to it.")
	o.OIDC.bindFlags(fs)
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

type ui struct {
	client     client.Client
	accounts   *accounts.Store
	cookies    *cookies
	gatewayURL string
	tryURL     string
	clients    clientAddrs
	// authLimit bounds log-ins and sign-ups per client address. Log-ins
	// to one account from browsers that have not logged in to it before
	// are bounded per address (emailLimit) and, at accountBurst times
	// that, across all addresses (accountLimit): one address cannot use
	// up the account's budget and lock the owner out, and a botnet
	// guesses no faster than a few addresses. deviceLimit bounds log-ins
	// from one browser that has logged in to the account before, which
	// strangers' failures never hold up.
	authLimit, emailLimit, accountLimit, deviceLimit *ratelimit.Keyed[string]
	signUpOpen                                       bool
	// passwords: log-ins with a password are on; oidc signs in with an
	// OpenID provider (nil: off).
	passwords  bool
	oidc       *oidcLogin
	quota      accounts.Quota
	pages      map[string]*template.Template
	httpClient *http.Client
	// filesClient carries the file browser's requests to the gateway,
	// which may stream for as long as a file takes.
	filesClient *http.Client
	// filesSecret derives the file browser's keys (fileskey.go), and
	// filesKeys remembers those found issued.
	filesSecret []byte
	filesKeys   issuedKeys
	// trail records what accounts do; records reads it back for the
	// Activity page.
	trail   *audit.Trail
	records *auditstore.Store
	// log has what fails on the server side.
	log *slog.Logger
}

// New builds the web UI on a client of the cluster.
func New(c client.Client, opts Options) (*Server, error) {
	secret := make([]byte, 32)
	if opts.SessionKeyFile != "" {
		s, err := readSecretFile(opts.SessionKeyFile)
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
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	saNamespace, saName, ok := strings.Cut(opts.ServiceAccount, "/")
	if !ok || saNamespace == "" || saName == "" {
		return nil, errors.New("--service-account must be namespace/name")
	}
	clients, err := parseTrustedProxies(opts.TrustedProxies)
	if err != nil {
		return nil, err
	}
	if !opts.PasswordLogin && opts.OIDC.Issuer == "" {
		return nil, errors.New("--password-login=false needs --oidc-issuer: no one could log in")
	}
	httpClient := &http.Client{Timeout: 30 * time.Second}
	oidcLogin, err := newOIDCLogin(opts.OIDC, httpClient, logging.OrDiscard(opts.Log))
	if err != nil {
		return nil, err
	}
	tryURL := opts.GatewayInternalURL
	if tryURL == "" {
		tryURL = opts.GatewayURL
	}
	u := &ui{
		client: c,
		accounts: &accounts.Store{Client: c, Namespace: opts.Namespace, Cost: opts.BcryptCost, TenantRole: TenantRole,
			Subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}, OwnerRole: clusterRoleOf("admin"),
			Quota: opts.Quota, Totals: opts.AccountTotals, Hashes: make(chan struct{}, max(opts.MaxPasswordChecks, 1)), HashWait: hashWait},
		signUpOpen:   opts.SignUp && opts.PasswordLogin,
		quota:        opts.Quota,
		cookies:      newCookies(secret, opts.SecureCookies),
		gatewayURL:   strings.TrimSuffix(opts.GatewayURL, "/"),
		tryURL:       strings.TrimSuffix(tryURL, "/"),
		clients:      clients,
		authLimit:    authLimit(opts.AuthPerMinute),
		emailLimit:   authLimit(opts.AuthPerMinute),
		accountLimit: authLimit(accountBurst * opts.AuthPerMinute),
		deviceLimit:  authLimit(opts.AuthPerMinute),
		pages:        pages,
		httpClient:   httpClient,
		oidc:         oidcLogin,
		passwords:    opts.PasswordLogin,
		filesClient:  &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		filesSecret:  derive(secret, "files"),
		log:          logging.OrDiscard(opts.Log),
	}
	// Every namespace the UI records for is an account's: its budgets are
	// the accounts' (the UI may not read namespaces to tell).
	records := &auditstore.Store{Client: c, Namespace: cmp.Or(opts.SystemNamespace, "sftpgate-system"), Budget: &storedbytes.Budget{
		Client: c, Namespace: cmp.Or(opts.SystemNamespace, "sftpgate-system"), Limits: opts.StateBudget.ForAccounts()}}
	u.trail = audit.NewTrail("webui", u.log).Keep(records, opts.Audit)
	u.records = records
	return &Server{handler: u.routes(), accounts: u.accounts, trail: u.trail}, nil
}

// accountBurst is how many addresses' worth of log-ins one account takes
// from browsers new to it.
const accountBurst = 3

// maxAuthBuckets bounds the buckets each log-in limit holds at once: past
// it, a new address, account or browser waits a second for one to refill.
const maxAuthBuckets = 1 << 16

func authLimit(perMinute float64) *ratelimit.Keyed[string] {
	return ratelimit.New[string](perMinute/60, int(max(perMinute, 1))).WithMaxKeys(maxAuthBuckets)
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
	r.Use(httpedge.RequestID, recovery.Middleware(u.serverError))
	u.route(r)
	// Every state-changing request must come from the UI's own pages.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.render(w, r, http.StatusForbidden, "message", page{Title: "Refused",
			Message: "This form was sent from another site, so it was refused. Open sftpgate yourself and try again there."})
	}))
	// Security headers outside, so that the refusal has them too.
	var issuer string
	if u.oidc != nil {
		issuer = u.oidc.opts.Issuer
	}
	return securityHeaders(issuer, csrf.Handler(r))
}

// route registers the UI's routes on r: those anyone may use here, those
// behind the log-in from signedInRoutes.
func (u *ui) route(r chi.Router) {
	signedIn := u.signedInRoutes()
	// Uploads stream through to the gateway, which bounds them; every
	// other body is a form, and small.
	for _, row := range signedIn {
		if row.method == tusMethods {
			r.With(u.requireAccount).Handle(row.pattern, u.signedIn(row))
		}
	}
	r.Handle("/s/{token}/uploads/*", u.serve(u.auditedUploads("share.upload", uploadPath, u.shareRoute(u.shareUploads))))
	r.Group(func(r chi.Router) {
		r.Use(limitBodies)
		static, _ := fs.Sub(assets, "static")
		r.Handle("/static/*", http.StripPrefix("/static/", cacheFor(time.Hour, http.FileServerFS(static))))
		r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		r.NotFound(func(w http.ResponseWriter, r *http.Request) { u.notFound(w, r) })

		r.Get("/", u.serve(u.home))
		r.Get("/signup", u.serve(u.signUpForm))
		r.Post("/signup", u.limited(u.serve(u.audited("signup", nil, u.signUp))))
		r.Get("/login", u.serve(u.logInForm))
		r.Post("/login", u.serve(u.audited("login", nil, u.logIn)))
		r.Post("/logout", u.serve(u.audited("logout", nil, u.logOut)))
		r.Get("/logged-out", u.serve(u.loggedOut))
		r.Get("/s/{token}", u.serve(u.audited("share.open", sharePath, u.shareRoute(u.serveShare))))
		r.Post("/s/{token}", u.serve(u.audited("share.password", nil, u.shareRoute(u.serveShare))))
		if u.oidc != nil {
			r.Get("/login/oidc", u.serve(u.startOIDC))
			r.Get("/login/oidc/callback", u.limited(u.serve(u.audited("login", nil, u.finishOIDC))))
		}

		r.Group(func(r chi.Router) {
			r.Use(u.requireAccount)
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
	need            permission
	action          string
	what            what
	serve           pageFunc
}

// tusMethods is the method of a tus endpoint: each of the protocol's,
// with bodies that stream (no limitBodies); only a creation (POST) is
// recorded, its parts being the gateway's records.
const tusMethods = "tus"

// noPermission is the need of a page that asks RBAC nothing itself: the
// person's own (their teams), whatever their role in the team they act
// in. Switching asks RBAC for a role in the team switched to.
var noPermission = permission{verb: "none"}

// signedInRoutes is every route behind the log-in, each with what it
// needs (TestSignedInRoutesNeedPermissions: no route without one).
func (u *ui) signedInRoutes() []signedInRoute {
	get, post, tus, conn := http.MethodGet, http.MethodPost, tusMethods, u.withConnection
	return []signedInRoute{
		{tus, "/connections/{name}/uploads/*", writeFiles, "file.upload", all(onConnection, uploadPath), conn(u.uploadProxy)},
		{get, "/connections", seeConnections, "", nil, u.listConnections},
		{get, "/connections/new", createConnections, "", nil, u.newConnection},
		{post, "/connections", createConnections, "connection.create", formNamed("SftpConnection", "name"), u.createConnection},
		{get, "/connections/{name}", seeConnections, "", nil, conn(u.showConnection)},
		{get, "/connections/{name}/status", seeConnections, "", nil, conn(u.connectionStatus)},
		{get, "/connections/{name}/edit", updateConnections, "", nil, conn(u.editConnection)},
		{post, "/connections/{name}/edit", updateConnections, "connection.update", all(onConnection, urlNamed("SftpConnection", "name")), conn(u.updateConnection)},
		{get, "/connections/{name}/delete", deleteConnections, "", nil, conn(u.confirmDeleteConnection)},
		{post, "/connections/{name}/delete", deleteConnections, "connection.delete", all(onConnection, urlNamed("SftpConnection", "name")), conn(u.deleteConnection)},
		{post, "/connections/{name}/try", readFiles, "connection.try", onConnection, conn(u.tryIt)},
		{get, "/connections/{name}/watches/new", createWatches, "", nil, conn(u.newWatchForm)},
		{post, "/connections/{name}/watches", createWatches, "watch.create", all(onConnection, formPath), conn(u.createWatch)},
		{get, "/connections/{name}/watches/{watch}/delete", deleteWatches, "", nil, conn(u.confirmDeleteWatch)},
		{post, "/connections/{name}/watches/{watch}/delete", deleteWatches, "watch.delete", all(onConnection, urlNamed("SftpWatch", "watch")), conn(u.deleteWatch)},
		{get, "/connections/{name}/files", readFiles, "file.list", all(onConnection, queryPath), conn(u.folder)},
		{get, "/connections/{name}/files/view", readFiles, "file.view", all(onConnection, queryPath), conn(u.showFile)},
		{get, "/connections/{name}/files/download", readFiles, "file.download", all(onConnection, queryPath), conn(u.download)},
		{post, "/connections/{name}/files/mkdir", writeFiles, "file.mkdir", all(onConnection, newFolderPath), conn(u.newFolder)},
		{post, "/connections/{name}/files/rename", renameFiles, "file.rename", all(onConnection, renamePaths), conn(u.rename)},
		{get, "/connections/{name}/files/delete", deleteFiles, "", nil, conn(u.confirmDelete)},
		{post, "/connections/{name}/files/delete", deleteFiles, "file.delete", all(onConnection, formPath), conn(u.deleteEntry)},
		{get, "/transfers", seeTransfers, "", nil, u.listTransfers},
		{get, "/transfers/new", createTransfers, "", nil, u.newTransferForm},
		{post, "/transfers", createTransfers, "transfer.create", nil, u.createTransfer},
		{get, "/transfers/{name}/delete", deleteTransfers, "", nil, u.confirmDeleteTransfer},
		{post, "/transfers/{name}/delete", deleteTransfers, "transfer.delete", urlNamed("Transfer", "name"), u.deleteTransfer},
		{get, "/openpgp", manageOpenPGPKeys, "", nil, u.listOpenPGPKeys},
		{post, "/openpgp", createOpenPGPKeys, "openpgp.create", formNamed("Secret", "name"), u.uploadOpenPGPKey},
		{get, "/openpgp/{name}/delete", deleteOpenPGPKeys, "", nil, u.confirmDeleteOpenPGPKey},
		{post, "/openpgp/{name}/delete", deleteOpenPGPKeys, "openpgp.delete", urlNamed("Secret", "name"), u.deleteOpenPGPKey},
		{get, "/keys", manageKeys, "", nil, u.listKeys},
		{get, "/keys/new", createKeys, "", nil, u.newKeyForm},
		{post, "/keys", createKeys, "key.create", nil, u.createKey},
		{get, "/keys/{name}/created", createKeys, "", nil, u.showNewKey},
		{get, "/keys/{name}/revoke", deleteKeys, "", nil, u.confirmRevokeKey},
		{post, "/keys/{name}/revoke", deleteKeys, "key.revoke", urlNamed("ApiKey", "name"), u.revokeKey},
		{get, "/activity", seeActivity, "", nil, u.showActivity},
		{get, "/members", seeMembers, "", nil, u.listMembers},
		{post, "/members", addMembers, "member.add", nil, u.addMember},
		{get, "/members/{name}/remove", removeMembers, "", nil, u.confirmRemoveMember},
		{post, "/members/{name}/remove", removeMembers, "member.remove", urlNamed("RoleBinding", "name"), u.removeMember},
		{get, "/shares", seeShares, "", nil, u.listShares},
		{get, "/connections/{name}/shares/new", createShares, "", nil, conn(u.newShareForm)},
		{post, "/connections/{name}/shares", createShares, "share.create", onConnection, conn(u.createShare)},
		{get, "/shares/{name}/created", createShares, "", nil, u.showNewShare},
		{get, "/shares/{name}/delete", deleteShares, "", nil, u.confirmDeleteShare},
		{post, "/shares/{name}/delete", deleteShares, "share.delete", urlNamed("ShareLink", "name"), u.deleteShare},
		{get, "/teams", noPermission, "", nil, u.listTeams},
		{post, "/teams", noPermission, "team.switch", nil, u.switchTeam},
		{post, "/teams/own", noPermission, "team.create", nil, u.makeOwnTeam},
		{post, "/members/team-name", renameTeam, "team.rename", nil, u.renameTeam},
	}
}

// signedIn is row's handler: what it needs asked of RBAC first (may), and
// all of it recorded.
func (u *ui) signedIn(row signedInRoute) http.HandlerFunc {
	h := row.serve
	if row.need != noPermission {
		h = u.may(row.need, h)
	}
	switch {
	case row.action == "":
	case row.method == tusMethods:
		h = u.auditedUploads(row.action, row.what, h)
	default:
		h = u.audited(row.action, row.what, h)
	}
	return u.serve(h)
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
const maxBody = maxKeyFile + 64<<10

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

// limited rate-limits a sign-up by client address (log-ins: logInAllowed).
func (u *ui) limited(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, retry := u.authLimit.Allow(u.clients.key(r)); !ok {
			u.tooMany(w, r, retry, tooManyFromAddress)
			return
		}
		next(w, r)
	}
}

const tooManyFromAddress = "Too many attempts from your address. Wait a minute, then try again."

func (u *ui) tooMany(w http.ResponseWriter, r *http.Request, retry time.Duration, message string) {
	w.Header().Set("Retry-After", ratelimit.RetryAfter(retry))
	u.render(w, r, http.StatusTooManyRequests, "message", page{Title: "Too many attempts", Message: message})
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
