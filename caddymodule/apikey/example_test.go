package apikey_test

import (
	"encoding/json"
	"fmt"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

func Example() {
	// The config as JSON: a plain secret, and a named key given by its digest.
	var keys []apikey.Key
	config := `["an-old-unnamed-secret-0123", {"name": "discord-bot", "key": "` + apikey.Digest("sg_the-bots-secret") + `"}]`
	if err := json.Unmarshal([]byte(config), &keys); err != nil {
		panic(err)
	}
	kr, err := apikey.NewKeyring(keys)
	if err != nil {
		panic(err)
	}
	// Match gives the position of the key presented; Names, in the same
	// order, what logs and metrics call it.
	names := kr.Names()
	for _, presented := range []string{"sg_the-bots-secret", "an-old-unnamed-secret-0123", "a guess"} {
		if i, ok := kr.Match(presented); ok {
			fmt.Println(names[i])
		} else {
			fmt.Println("no key")
		}
	}
	// Output:
	// discord-bot
	// key-1
	// no key
}
