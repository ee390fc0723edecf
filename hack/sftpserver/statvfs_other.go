//go:build !linux

package sftpserver

import (
	"os"

	"github.com/pkg/sftp"
)

// statVFS is Linux's only.
func statVFS(*os.File) (*sftp.StatVFS, error) { return nil, sftp.ErrSSHFxOpUnsupported }
