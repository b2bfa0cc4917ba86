package oanbridge

import "context"

// FetchSignedForTest exposes the signed-URL fetcher.
func FetchSignedForTest(ctx context.Context, u string) ([]byte, error) {
	return fetchSigned(ctx, u, 1<<20)
}
