//go:build goolm

package matrixtest

import (
	"context"
	"io"
	"net/http"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
)

const encryption = true

// startCrypto gives cli end-to-end encryption, its state in the SQLite
// file at path.
func startCrypto(ctx context.Context, cli *mautrix.Client, path string) error {
	helper, err := cryptohelper.NewCryptoHelper(cli, []byte("loadout-test-pickle"), path)
	if err != nil {
		return err
	}
	if err := helper.Init(ctx); err != nil {
		return err
	}
	cli.Crypto = helper
	return nil
}

func readAll(resp *http.Response) ([]byte, error) { return io.ReadAll(resp.Body) }
