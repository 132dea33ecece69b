// Command widgetshot takes the screenshot of the status widget
// (examples/widget) against the running demo: it opens the page in headless
// Chromium, waits for the public part, types the demo key into the staff part
// (where the page has one) and captures the widget. A screenshot taken as
// the page loads (chromium --headless --screenshot) shows "Loading…": the
// widget fills in when its first answers come.
//
//	go run ./cmd/caddy run --config Caddyfile.example &   # the demo
//	go run ./test/widgetshot -o examples/widget/screenshot.png
//	go run ./test/widgetshot -url http://127.0.0.1:8082/network.html -o network.png
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/statusgate/statusgate/test/chromium"
)

func main() {
	page := flag.String("url", "http://127.0.0.1:8082/", "the widget page")
	key := flag.String("key", "demo-key-change-me-0123", "the key typed into the staff part; \"\" for none")
	out := flag.String("o", "examples/widget/screenshot.png", "where to write the PNG")
	flag.Parse()

	ctx, stop, err := chromium.Start(720, 1000)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var png []byte
	var staff bool
	err = chromedp.Run(ctx,
		chromedp.Navigate(*page),
		chromedp.Poll(`document.querySelector('[data-sg=public-state]')?.dataset.state === 'ok'`, nil),
		chromedp.Evaluate(`!!document.querySelector('[data-sg=key]')`, &staff),
	)
	if err == nil && staff && *key != "" {
		err = chromedp.Run(ctx,
			chromedp.SendKeys(`[data-sg=key]`, *key, chromedp.ByQuery),
			chromedp.Click(`[data-sg=connect] button[type=submit]`, chromedp.ByQuery),
			chromedp.Poll(`document.querySelector('[data-sg=staff-state]')?.dataset.state === 'ok'`, nil),
		)
	}
	if err == nil {
		err = chromedp.Run(ctx, chromedp.Screenshot(`.statusgate`, &png, chromedp.ByQuery))
	}
	if err != nil {
		log.Fatalf("%s: %v", *page, err)
	}
	if err := os.WriteFile(*out, png, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d bytes\n", *out, len(png))
}
