// Package chromium starts the headless Chromium that the widget's browser
// tests and its screenshot tool drive through the DevTools protocol
// (chromedp). It looks for Debian's chromium package; CI installs it
// (.ci/run), and without it the browser tests are skipped.
package chromium

import (
	"context"
	"errors"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// Install is what to run where Chromium is missing.
const Install = "apt-get install chromium"

// ErrMissing says that no Chromium binary was found.
var ErrMissing = errors.New("chromium not found; install it with `" + Install + "`")

// names are the binaries tried, in order: Debian's package, then the names
// other distributions use.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Path returns the first Chromium binary on PATH, or ErrMissing.
func Path() (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrMissing
}

// Start launches one headless Chromium and returns a context for its first
// tab; new tabs are chromedp.NewContext(ctx). stop ends the browser and
// removes its profile directory. The flags: --no-sandbox because CI runs as
// root, where Chromium's sandbox refuses to start; --disable-gpu and
// --disable-dev-shm-usage for machines without a GPU and with a small
// /dev/shm, as containers have.
func Start(width, height int) (ctx context.Context, stop func(), err error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	stop = func() { cancelBrowser(); cancelAlloc() }
	if err := chromedp.Run(bctx); err != nil { // starts the browser
		stop()
		return nil, nil, err
	}
	return bctx, stop, nil
}
