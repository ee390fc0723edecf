package dev

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The control plane dies with sftpgate-dev, however that ends (Ctrl-C, a
// crash, kill -9, the out-of-memory killer): envtest starts kube-apiserver
// and etcd in process groups of their own, so without this they would run
// on as orphans, holding their ports and memory. They are started through
// links named after them to this binary, which asks the kernel to kill it
// when its parent dies (PR_SET_PDEATHSIG) and then becomes the real binary.
const (
	envAssets = "SFTPGATE_DEV_ASSETS" // where the real binaries are
	envParent = "SFTPGATE_DEV_PID"    // the sftpgate-dev they belong to
)

var controlPlaneBinaries = []string{"kube-apiserver", "etcd"}

// startControlPlane starts env's kube-apiserver and etcd, tied to this
// process, and returns the function that stops them.
func startControlPlane(env *envtest.Environment, dataDir string) (stop func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	links := filepath.Join(dataDir, "bin")
	if err := os.MkdirAll(links, 0o700); err != nil {
		return nil, err
	}
	for _, name := range controlPlaneBinaries {
		link := filepath.Join(links, name)
		if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err := os.Symlink(self, link); err != nil {
			return nil, err
		}
	}
	for k, v := range map[string]string{envAssets: env.BinaryAssetsDirectory, envParent: strconv.Itoa(os.Getpid())} {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	env.ControlPlane.GetAPIServer().Path = filepath.Join(links, "kube-apiserver")
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Path = filepath.Join(links, "etcd")

	// The kernel sends the signal when the thread that started a process
	// ends, not the process: the control plane is started and stopped on
	// one thread kept for it until then.
	started, stopping, stopped := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, err := env.Start()
		started <- err
		if err != nil {
			return
		}
		<-stopping
		stopped <- env.Stop()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error {
		close(stopping)
		return <-stopped
	}, nil
}

// ExecControlPlane makes a process started through one of those links the
// control plane binary it is named after, set to die with its parent; in
// any other process it returns at once.
func ExecControlPlane() {
	name, assets := filepath.Base(os.Args[0]), os.Getenv(envAssets)
	isControlPlane := false
	for _, n := range controlPlaneBinaries {
		isControlPlane = isControlPlane || n == name
	}
	if !isControlPlane || assets == "" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	// The parent may have died before the signal was asked for.
	if strconv.Itoa(os.Getppid()) != os.Getenv(envParent) {
		os.Exit(1)
	}
	err := syscall.Exec(filepath.Join(assets, name), os.Args, os.Environ()) //nolint:gosec // the binary envtest was given
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}
