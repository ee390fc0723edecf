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
	// turn, and take no place here. Expectations, once they exist, run
	// for ever as watches do and take a bound here beside Watches.
	Watches int
}

// MaxAccounts is the most accounts whose Quota fits the Totals; bounded
// is false when nothing bounds them.
func (s *Store) MaxAccounts() (most int, bounded bool) {
	if s.Totals.Watches == 0 || s.Quota.Watches == 0 {
		return 0, false
	}
	return s.Totals.Watches / s.Quota.Watches, true
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
	if n := len(list.Items); n >= most {
		return fmt.Errorf("%w (%d accounts of --max-watches-per-account %d fill --max-account-watches-total %d)",
			ErrFull, n, s.Quota.Watches, s.Totals.Watches)
	}
	return nil
}
