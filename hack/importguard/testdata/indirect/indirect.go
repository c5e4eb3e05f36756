// Package indirect reaches a client only through another package.
package indirect

import "github.com/sidecarset/sidecarset/hack/importguard/testdata/direct"

// Reader comes from a package that imports a client.
type Reader = direct.Reader
