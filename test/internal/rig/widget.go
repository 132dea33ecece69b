package rig

import (
	"strconv"
)

// The widget's page is served from WidgetOrigin, another origin than the
// gateway's (http://localhost:<HTTPPort>), so every call it makes is
// cross-origin.
var (
	WidgetOrigin = "http://127.0.0.1:" + strconv.Itoa(WidgetPort)
	GatewayURL   = "http://" + GatewayAddr
)
