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
	fmt.Println(kr.Lookup("sg_the-bots-secret"))
	fmt.Println(kr.Lookup("an-old-unnamed-secret-0123"))
	fmt.Println(kr.Lookup("a guess"))
	// Output:
	// discord-bot true
	// key-1 true
	//  false
}
