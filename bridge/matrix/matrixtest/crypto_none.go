//go:build !goolm

package matrixtest

import (
	"context"
	"errors"
	"io"
	"net/http"

	"maunium.net/go/mautrix"
)

const encryption = false

func startCrypto(context.Context, *mautrix.Client, string) error {
	return errors.New("end-to-end encryption needs the goolm build tag")
}

func readAll(resp *http.Response) ([]byte, error) { return io.ReadAll(resp.Body) }
