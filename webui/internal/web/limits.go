package web

import (
	"net/http"

	"github.com/sftpgate/sftpgate/internal/ratelimit"
)

// Limits bound password guesses: log-ins and sign-ups, and a share link's
// password. Auth is per client address. Log-ins to one account from
// browsers that have not logged in to it before are bounded per address
// (Email) and, at accountBurst times that, across all addresses
// (Account, which also bounds each share link's passwords): one address
// cannot use up the account's budget and lock the owner out, and a botnet
// guesses no faster than a few addresses. Device bounds log-ins from one
// browser that has logged in to the account before, which strangers'
// failures never hold up.
type Limits struct {
	Auth, Email, Account, Device *ratelimit.Keyed[string]
}

// NewLimits are limits of perMinute each (Account: accountBurst times).
func NewLimits(perMinute float64) *Limits {
	return &Limits{Auth: authLimit(perMinute), Email: authLimit(perMinute), Account: authLimit(accountBurst * perMinute),
		Device: authLimit(perMinute)}
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

// Limited rate-limits a sign-up by client address (log-ins: signin's
// logInAllowed).
func (u *Core) Limited(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, retry := u.Limits.Auth.Allow(u.Clients.Key(r)); !ok {
			u.TooMany(w, r, retry, TooManyFromAddress)
			return
		}
		next(w, r)
	}
}

// TooManyFromAddress says why a client's address was refused.
const TooManyFromAddress = "Too many attempts from your address. Wait a minute, then try again."
