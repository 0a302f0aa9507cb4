//go:build !goolm

package matrix

import "context"

// encryption: this build has no end-to-end encryption.
const encryption = false

// startE2EE in a build without the goolm tag: no encryption. Encrypted
// rooms are answered once that they cannot be read.
func startE2EE(_ context.Context, a *Adapter) (e2ee, error) {
	a.log.Warn("matrix: this build has no end-to-end encryption (build with -tags goolm); encrypted rooms are not read")
	return nil, nil
}
