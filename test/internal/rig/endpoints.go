package rig

// PlayerFields are the player's protected fields by default, in config order.
var PlayerFields = []string{"op", "banned", "chatplatform", "discord"}
