package accounts

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Totals are what all web UI accounts together may run, as the worker
// bounds them (its flags of the same names; set them alike). Past them
// the worker runs no more of strangers' work; an account is not made
// once the accounts, each with its Quota, could pass one. Zero is no
// bound.
type Totals struct {
	// Watches is --max-account-watches-total: watches run for ever, so an
	// account made past it would have watches that never run. Transfers
	// end: past the worker's --max-account-transfers-total they wait their
	// turn, and take no place here. Expectations is
	// --max-account-expectations-total: they run for ever as watches do.
	Watches, Expectations int
}

// MaxAccounts is the most accounts whose Quota fits the Totals (each
// total its own kind's); bounded is false when nothing bounds them.
func (s *Store) MaxAccounts() (most int, bounded bool) {
	for _, b := range s.bounds() {
		if b.total == 0 || b.quota == 0 {
			continue
		}
		if n := b.total / b.quota; !bounded || n < most {
			most, bounded = n, true
		}
	}
	return most, bounded
}

// bound is a kind whose total bounds the accounts, with its flags' names.
type bound struct {
	total, quota    int
	perAccount, all string
}

func (s *Store) bounds() []bound {
	return []bound{
		{s.Totals.Watches, s.Quota.Watches, "--max-watches-per-account", "--max-account-watches-total"},
		{s.Totals.Expectations, s.Quota.Expectations, "--max-expectations-per-account", "--max-account-expectations-total"},
	}
}

// room says whether one more account fits MaxAccounts (ErrFull if not),
// counting the accounts' namespaces (labelled LabelAccount, as the worker
// tells strangers'), those of accounts made before and by any other
// means included.
func (s *Store) room(ctx context.Context) error {
	most, bounded := s.MaxAccounts()
	if !bounded {
		return nil
	}
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := s.Client.List(ctx, &list, client.HasLabels{LabelAccount}); err != nil {
		return fmt.Errorf("counting the accounts: %w", err)
	}
	n := len(list.Items)
	if n < most {
		return nil
	}
	for _, b := range s.bounds() {
		if b.quota > 0 && b.total > 0 && n*b.quota >= b.total {
			return fmt.Errorf("%w (%d accounts of %s %d fill %s %d)", ErrFull, n, b.perAccount, b.quota, b.all, b.total)
		}
	}
	return fmt.Errorf("%w (%d accounts)", ErrFull, n)
}
