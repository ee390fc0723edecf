package uploads

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"

	"github.com/sftpgate/sftpgate/internal/uploadrecord"
)

// One request at a time writes to an upload, whichever replica it
// reaches: on a replica, tusd's memory locker (a new request asks the one
// before to stop, as a client retrying a part it thinks lost wants);
// across replicas, a hold written on the upload's record, renewed while
// the request runs and lapsing if its replica dies. A request that finds
// another replica's hold waits for it, up to tusd's lock timeout. A HEAD,
// which changes nothing, takes no hold and makes no write.

// Hold timing: how long a hold lasts unless renewed, and how often it is;
// how long a HEAD that must put a file in place waits for another's hold
// (as long as tusd waits for its lock).
const (
	holdWait   = 20 * time.Second
	holdFor    = 30 * time.Second
	holdRenew  = holdFor / 3
	holdRetry  = 200 * time.Millisecond
	holderSize = 16
)

type locker struct {
	records *uploadrecord.Store
	memory  *memorylocker.MemoryLocker
}

func (l *locker) NewLock(id string) (handler.Lock, error) {
	m, err := l.memory.NewLock(id)
	if err != nil {
		return nil, err
	}
	return &lock{records: l.records, id: id, memory: m, holder: rand.Text()[:holderSize]}, nil
}

type lock struct {
	records *uploadrecord.Store
	id      string
	memory  handler.Lock
	holder  string
	stop    context.CancelFunc
	renewed sync.WaitGroup
}

// errBusy is a request that waited for another's hold as long as it
// may. It goes through the request's answer: tusd answers a HEAD's
// errors without a body, and so without their code.
var errBusy = errors.New("another request holds the upload")

func (k *lock) Lock(ctx context.Context, requestRelease func()) error {
	if err := k.memory.Lock(ctx, requestRelease); err != nil {
		if errors.Is(err, handler.ErrLockTimeout) {
			return requestOf(ctx).fail(errBusy)
		}
		return err
	}
	if req := requestOf(ctx); req.readOnly {
		// A HEAD writes nothing to the record, unless it finds the upload
		// complete and puts its file in place: it holds the upload then.
		req.holdNow = k.hold
		return nil
	}
	if err := k.hold(ctx); err != nil {
		_ = k.memory.Unlock()
		return err
	}
	return nil
}

// hold takes the upload's hold across replicas, waiting while another
// request has it, and renews it until Unlock.
func (k *lock) hold(ctx context.Context) error {
	for {
		err := k.records.Hold(ctx, k.id, k.holder, time.Now().Add(holdFor))
		if err == nil || errors.Is(err, uploadrecord.ErrNotFound) {
			break // none: GetUpload says so
		}
		if ctx.Err() != nil {
			// The wait ended during a try (chaos seed 2).
			return requestOf(ctx).fail(errBusy)
		}
		if !errors.Is(err, uploadrecord.ErrHeld) {
			return requestOf(ctx).fail(err)
		}
		select {
		case <-ctx.Done():
			return requestOf(ctx).fail(errBusy)
		case <-time.After(holdRetry):
		}
	}
	renewCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	k.stop = stop
	k.renewed.Go(func() {
		tick := time.NewTicker(holdRenew)
		defer tick.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-tick.C:
				_ = k.records.Hold(renewCtx, k.id, k.holder, time.Now().Add(holdFor))
			}
		}
	})
	return nil
}

func (k *lock) Unlock() error {
	if k.stop == nil {
		return k.memory.Unlock() // held on this replica alone
	}
	k.stop()
	k.renewed.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := k.records.Release(ctx, k.id, k.holder)
	return errors.Join(err, k.memory.Unlock())
}
