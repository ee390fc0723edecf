//go:build !linux

package sftpdial

import "net"

// withQuickAck is Linux's; elsewhere delayed ACKs stay as they are.
func withQuickAck(conn net.Conn) net.Conn { return conn }

func disarmQuickAck(net.Conn) {}
