// Package pgp encrypts, signs, decrypts and verifies OpenPGP messages as
// streams (ProtonMail's go-crypto, what GnuPG 2.2 and later read and
// write), with failures typed by what a transfer reports of them:
// KeyNotFound, SignatureInvalid and MessageCorrupt.
package pgp

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/flate"
	"compress/zlib"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ProtonMail/go-crypto/openpgp/s2k"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
)

// Reasons a message or key fails, as a Transfer reports them.
const (
	// KeyNotFound: no key given decrypts the message, or a key given
	// cannot be read, unlocked or used.
	KeyNotFound = v1alpha1.ReasonKeyNotFound
	// SignatureInvalid: a signature required is missing, does not verify,
	// or is by a key not among those given.
	SignatureInvalid = v1alpha1.ReasonSignatureInvalid
	// MessageCorrupt: the message is cut short, altered, or not OpenPGP.
	MessageCorrupt = v1alpha1.ReasonMessageCorrupt
)

// Error is a failure with its reason (one of the constants above).
type Error struct {
	Reason string
	Err    error
	// Kind is what was wrong with a key ReadKeys refused, for errors.Is
	// (ErrNotAKey, ErrLocked, ErrWrongPassphrase, ErrTooManyKeys), so that
	// a form can say it in its own words; nil for other failures.
	Kind error
}

// What ReadKeys found wrong with a key (Error.Kind).
var (
	ErrNotAKey         = errors.New("not an OpenPGP key")
	ErrLocked          = errors.New("locked by a passphrase none was given for")
	ErrWrongPassphrase = errors.New("the passphrase does not unlock the key")
	ErrTooManyKeys     = errors.New("more keys than one Secret may hold")
)

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Kind}
}

// of is e, of kind.
func (e *Error) of(kind error) *Error {
	e.Kind = kind
	return e
}

func failed(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// MaxKeysPerSecret bounds the keys read from one Secret's value.
const MaxKeysPerSecret = 32

// Keys are the keys read from one Secret: public keys, or private keys
// unlocked with their passphrase.
type Keys = openpgp.EntityList

// ReadKeys reads the keys in b, armored or binary (as gpg --export or
// --export-secret-keys writes them), and unlocks private ones with
// passphrase. what names the keys in errors ("the key in Secret x").
func ReadKeys(b []byte, passphrase []byte, what string) (Keys, error) {
	var (
		keys Keys
		err  error
	)
	if armored(b) {
		keys, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	} else {
		keys, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	switch {
	case err != nil:
		return nil, failed(KeyNotFound, "%s is not an OpenPGP key: %s", what, message(err)).of(ErrNotAKey)
	case len(keys) == 0:
		return nil, failed(KeyNotFound, "%s holds no OpenPGP key", what).of(ErrNotAKey)
	case len(keys) > MaxKeysPerSecret:
		return nil, failed(KeyNotFound, "%s holds %d keys, more than the %d allowed", what, len(keys), MaxKeysPerSecret).of(ErrTooManyKeys)
	}
	for _, k := range keys {
		if k.PrivateKey == nil || !k.PrivateKey.Encrypted && !anyEncrypted(k) {
			continue
		}
		if len(passphrase) == 0 {
			return nil, failed(KeyNotFound, "%s is locked by a passphrase, and the Secret has none", what).of(ErrLocked)
		}
		if err := checkS2K(k); err != nil {
			return nil, failed(KeyNotFound, "%s: %s", what, err)
		}
		if err := k.DecryptPrivateKeys(passphrase); err != nil {
			return nil, failed(KeyNotFound, "the passphrase does not unlock %s", what).of(ErrWrongPassphrase)
		}
	}
	return keys, nil
}

// Bounds of the Argon2 passphrase protection (RFC 9580) of the private
// keys ReadKeys unlocks: a key says how much memory (up to 2 TiB) and how
// many passes unlocking it takes, and one that asks for more than these is
// refused before its passphrase is tried. 128 MiB and 4 passes are twice
// the memory and more than the passes of go-crypto's default.
const (
	MaxArgon2MemoryExp = 17 // 2^17 KiB
	MaxArgon2Passes    = 4
)

// checkS2K refuses the keys of e whose unlocking asks for more than the
// bounds, or whose protection cannot be read.
func checkS2K(e *openpgp.Entity) error {
	keys := []*packet.PrivateKey{e.PrivateKey}
	for _, s := range e.Subkeys {
		keys = append(keys, s.PrivateKey)
	}
	for _, pk := range keys {
		if pk == nil || !pk.Encrypted {
			continue
		}
		spec, ok := s2kSpecifier(pk)
		switch {
		case !ok:
			return errors.New("its passphrase protection cannot be read")
		case spec[0] != byte(s2k.Argon2S2K):
			continue
		case len(spec) < 20:
			return errors.New("its Argon2 protection is cut short")
		case spec[19] > MaxArgon2MemoryExp || spec[17] > MaxArgon2Passes:
			return fmt.Errorf("its passphrase protection (Argon2) asks for %d KiB and %d passes to unlock it, more than the %d KiB and %d passes allowed",
				uint64(1)<<spec[19], spec[17], 1<<MaxArgon2MemoryExp, MaxArgon2Passes)
		}
	}
	return nil
}

// s2kSpecifier is the S2K specifier that protects pk (RFC 9580 5.5.3), read
// from pk serialized, as go-crypto keeps what it parsed to itself.
func s2kSpecifier(pk *packet.PrivateKey) ([]byte, bool) {
	var priv, pub bytes.Buffer
	if pk.Serialize(&priv) != nil || pk.PublicKey.Serialize(&pub) != nil {
		return nil, false
	}
	body, public := packetBody(priv.Bytes()), packetBody(pub.Bytes())
	i := len(public)
	if body == nil || public == nil || !bytes.HasPrefix(body, public) || i >= len(body) {
		return nil, false
	}
	usage := body[i]
	if usage != 253 && usage != 254 && usage != 255 {
		return nil, false
	}
	i += 2 // the usage and the cipher
	if pk.Version == 5 || pk.Version == 6 {
		i++ // the count of the fields that follow
	}
	if usage == 253 {
		i++ // the AEAD mode
	}
	if pk.Version == 6 {
		i++ // the specifier's length
	}
	if i >= len(body) {
		return nil, false
	}
	return body[i:], true
}

// packetBody is the body of b's first packet (RFC 9580 4.2), or nil.
func packetBody(b []byte) []byte {
	if len(b) < 2 {
		return nil
	}
	var header int
	switch {
	case b[0]&0x40 == 0: // the legacy format
		header = [...]int{2, 3, 5, 1}[b[0]&3]
	case b[1] < 192:
		header = 2
	case b[1] < 224:
		header = 3
	case b[1] == 255:
		header = 6
	default:
		return nil // a partial length, which no key has
	}
	if len(b) < header {
		return nil
	}
	return b[header:]
}

func anyEncrypted(e *openpgp.Entity) bool {
	for _, s := range e.Subkeys {
		if s.PrivateKey != nil && s.PrivateKey.Encrypted {
			return true
		}
	}
	return false
}

// Frozen is keys kept as bytes (private ones unlocked), for many copies
// at once: go-crypto's keys cache what they verified inside themselves and
// are not for two goroutines at once, so each copy reads its own (Thaw),
// which costs no passphrase.
type Frozen []byte

// Freeze keeps keys as Thaw reads them back.
func Freeze(keys Keys) (Frozen, error) {
	var buf bytes.Buffer
	for _, k := range keys {
		var err error
		if k.PrivateKey != nil {
			err = k.SerializePrivateWithoutSigning(&buf, config)
		} else {
			err = k.Serialize(&buf)
		}
		if err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// Thaw is a copy of the frozen keys of its own; nil for none.
func (f Frozen) Thaw() (Keys, error) {
	if len(f) == 0 {
		return nil, nil
	}
	return openpgp.ReadKeyRing(bytes.NewReader(f))
}

// Fingerprints are the keys' primary fingerprints, in upper-case hex as
// gpg prints them.
func Fingerprints(keys Keys) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, strings.ToUpper(hex.EncodeToString(k.PrimaryKey.Fingerprint)))
	}
	return out
}

// Private reports whether every key holds its private part.
func Private(keys Keys) bool {
	for _, k := range keys {
		if k.PrivateKey == nil {
			return false
		}
	}
	return len(keys) > 0
}

func armored(b []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("-----BEGIN PGP"))
}

// config is go-crypto's defaults: AES-128 in SEIPD v1 with v4 keys, which
// GnuPG 2.2 reads, SEIPD v2 to keys that ask for it, no compression.
var config = &packet.Config{}

// Encryption is what Encrypt does: to whom, signed by whom, armored or not.
type Encryption struct {
	To     Keys
	Signer Keys // nil: not signed
	Armor  bool
	// Name is the file's name recorded in the message (gpg's
	// --decrypt-files and --use-embedded-filename read it).
	Name string
}

// Encrypt returns the writer of the clear text, whose Close ends the
// message written to w.
func Encrypt(w io.Writer, e Encryption) (io.WriteCloser, error) {
	out := w
	var arm io.WriteCloser
	if e.Armor {
		var err error
		if arm, err = armor.Encode(w, openpgp.MessageType, nil); err != nil {
			return nil, err
		}
		out = arm
	}
	params := &openpgp.EncryptParams{
		Hints:   &openpgp.FileHints{FileName: e.Name},
		Signers: e.Signer,
		Config:  config,
	}
	plain, err := openpgp.EncryptWithParams(out, e.To, nil, params)
	if err != nil {
		// The keys chosen, or the first packets' write: the caller
		// tells a write that failed by its own writer.
		return nil, &Error{Reason: KeyNotFound, Err: fmt.Errorf("no key can encrypt or sign: %w", err)}
	}
	return &closer{WriteCloser: plain, arm: arm}, nil
}

type closer struct {
	io.WriteCloser
	arm io.WriteCloser
}

func (c *closer) Close() error {
	if err := c.WriteCloser.Close(); err != nil {
		return err
	}
	if c.arm != nil {
		return c.arm.Close()
	}
	return nil
}

// Decryption is what Decrypt does: with which private keys, and whether a
// signature by one of Verify is required.
type Decryption struct {
	Keys Keys
	// Verify, when set, requires a valid signature by one of its keys.
	Verify Keys
}

// Decrypt returns the clear text of the message read from r. Its last
// Read returns io.EOF only once the whole message checked out (its
// integrity, and the signature Verify requires); until then what it gave
// may be forged or cut short, so whoever writes it keeps it aside.
func Decrypt(r io.Reader, d Decryption) (io.Reader, error) {
	br := bufio.NewReader(r)
	var in io.Reader = br
	if head, _ := br.Peek(64); armored(head) {
		block, err := armor.Decode(br)
		if err != nil {
			return nil, failed(MessageCorrupt, "not an OpenPGP message: %s", message(err))
		}
		in = block.Body
	}
	ring := append(append(Keys{}, d.Keys...), d.Verify...)
	md, err := openpgp.ReadMessage(in, ring, nil, config)
	if err != nil {
		return nil, typed(err)
	}
	if !md.IsEncrypted && len(md.EncryptedToKeyIds) == 0 && !md.IsSymmetricallyEncrypted {
		return nil, failed(MessageCorrupt, "the message is not encrypted")
	}
	return &reader{md: md, verify: d.Verify}, nil
}

type reader struct {
	md     *openpgp.MessageDetails
	verify Keys
	err    error
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.md.UnverifiedBody.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		if err = r.check(); err == nil {
			err = io.EOF
		}
	case err != nil:
		err = typed(err)
	}
	r.err = err
	return n, err
}

// check is the signature's verdict, once the whole message was read.
func (r *reader) check() error {
	if r.verify == nil {
		return nil
	}
	md := r.md
	switch {
	case !md.IsSigned:
		return failed(SignatureInvalid, "the message is not signed, and a signature is required")
	case errors.Is(md.SignatureError, pgperrors.ErrUnknownIssuer):
		return failed(SignatureInvalid, "the message is signed by a key not among those that verify it")
	case md.SignatureError != nil:
		return failed(SignatureInvalid, "the signature does not verify: %s", message(md.SignatureError))
	case md.SignedBy == nil || md.SignedBy.Entity == nil || !among(md.SignedBy.Entity, r.verify):
		return failed(SignatureInvalid, "the message is signed by a key not among those that verify it")
	}
	return nil
}

func among(e *openpgp.Entity, keys Keys) bool {
	for _, k := range keys {
		if bytes.Equal(k.PrimaryKey.Fingerprint, e.PrimaryKey.Fingerprint) {
			return true
		}
	}
	return false
}

// typed gives err, from reading a message, its reason.
func typed(err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, pgperrors.ErrKeyIncorrect):
		return failed(KeyNotFound, "no key given decrypts the message")
	case errors.Is(err, pgperrors.ErrMDCHashMismatch), errors.Is(err, pgperrors.ErrMDCMissing):
		return failed(MessageCorrupt, "the message was altered or cut short: %s", message(err))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return failed(MessageCorrupt, "the message is cut short")
	case errors.As(err, new(base64.CorruptInputError)):
		// An armored message's body, not the file it is read from.
		return failed(MessageCorrupt, "the armored message is not base64: %s", message(err))
	case errors.As(err, new(flate.CorruptInputError)), errors.As(err, new(bzip2.StructuralError)),
		errors.Is(err, zlib.ErrChecksum), errors.Is(err, zlib.ErrHeader), errors.Is(err, zlib.ErrDictionary):
		// A compressed packet's data, inflated from the message.
		return failed(MessageCorrupt, "the message's compressed data is corrupt: %s", message(err))
	}
	var (
		structural pgperrors.StructuralError
		sig        pgperrors.SignatureError
		session    pgperrors.DecryptWithSessionKeyError
		unsup      pgperrors.UnsupportedError
		unknown    pgperrors.UnknownPacketTypeError
		critical   pgperrors.CriticalUnknownPacketTypeError
		aead       pgperrors.AEADError
		malformed  pgperrors.ErrMalformedMessage
	)
	switch {
	case errors.As(err, &structural), errors.As(err, &sig), errors.As(err, &session),
		errors.As(err, &unsup), errors.As(err, &unknown), errors.As(err, &critical),
		errors.As(err, &aead), errors.As(err, &malformed):
		return failed(MessageCorrupt, "the message cannot be read: %s", message(err))
	}
	// Anything else comes from reading the file: the caller's to judge.
	return err
}

// message is err's text without go-crypto's "openpgp: " prefix.
func message(err error) string {
	return strings.TrimPrefix(err.Error(), "openpgp: ")
}
