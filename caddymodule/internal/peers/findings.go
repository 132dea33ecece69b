package peers

import (
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// finding is one mistake seen in the storage: key names it, so that it is
// reported once; settle says it must last (a rolling reload goes through
// it for a moment).
type finding struct {
	key    string
	settle bool
	msg    string
	fields []zap.Field
}

// The warnings, each with its fix.
const (
	msgSharedID       = "another gateway process has this one's instance ID: the distributed rate limit counts the two as one, and admits its limit once per process; give each gateway its own data directory (XDG_DATA_HOME) (docs/cluster.md)"
	msgOtherBackend   = "gateways of another backend write to this storage: the distributed rate limit adds their counts to this one's zones of the same name, so a caller is refused here for what it did there; give each deployment its own key_prefix in storage redis (docs/cluster.md)"
	msgUnclaimedState = "another Caddy instance writes distributed rate-limit states to this storage, and no statusgate gateway runs under its instance ID: its counts are added to this gateway's zones of the same name; give each deployment its own key_prefix in storage redis (docs/cluster.md)"
	msgInstances      = "another gateway of this backend has a different instances: each takes its share of the backend by its own count, so together they admit more (or less) than the backend's limits; give every gateway of the backend the same instances, the number of gateways (docs/cluster.md)"
	msgGateways       = "more gateway processes of this backend are running than its instances: each admits its share, so together they admit more than the backend's limits; set instances to the number of gateways on every one of them, or stop the extra one (docs/cluster.md)"
	msgLane           = "another gateway of this backend has the main-thread lane open too: together they put more than max_main_thread requests at once on the game's main thread; keep placeholders on one gateway and write disable placeholders on the others (docs/cluster.md)"
)

// findings compares this process's heartbeat, me, with the others', and
// names the rate-limit states that no heartbeat claims (by instance ID).
func findings(me Beat, beats []live, unclaimed []string) []finding {
	var out []finding
	other := func(b Beat) []zap.Field {
		return []zap.Field{zap.String("other_host", b.Host), zap.Int("other_pid", b.PID)}
	}
	ours := map[string]Backend{}
	for _, b := range me.Backends {
		ours[b.Name] = b
	}
	var alive []Beat
	for _, b := range beats {
		if b.live {
			alive = append(alive, b.Beat)
		}
	}
	for _, b := range alive {
		if b.InstanceID == me.InstanceID {
			out = append(out, finding{key: "instance_id " + b.Process, msg: msgSharedID,
				fields: append([]zap.Field{zap.String("instance_id", me.InstanceID), zap.String("data_dir", me.DataDir)}, other(b)...)})
		}
		// A heartbeat of an earlier statusgate names no backend.
		if len(b.Backends) > 0 && !slices.ContainsFunc(b.Backends, func(x Backend) bool { _, ok := ours[x.Name]; return ok }) {
			names := backendNames(b.Backends)
			// Settled: a reload that changes the declaration, one gateway
			// after the other, shows two backends for a moment.
			out = append(out, finding{key: "backend " + strings.Join(names, " "), settle: true, msg: msgOtherBackend,
				fields: append([]zap.Field{zap.Strings("backends", backendNames(me.Backends)), zap.Strings("other_backends", names), zap.String("other_instance_id", b.InstanceID)}, other(b)...)})
		}
	}
	for _, mine := range me.Backends {
		name := mine.Name
		gateways, agree := 1, true
		for _, b := range alive {
			i := slices.IndexFunc(b.Backends, func(x Backend) bool { return x.Name == name })
			if i < 0 {
				continue
			}
			theirs := b.Backends[i]
			gateways++
			if theirs.Instances != mine.Instances {
				agree = false
				out = append(out, finding{key: "instances " + name + " " + strconv.Itoa(mine.Instances) + " " + strconv.Itoa(theirs.Instances), settle: true, msg: msgInstances,
					fields: append([]zap.Field{zap.String("backend", name), zap.Int("instances", mine.Instances), zap.Int("other_instances", theirs.Instances)}, other(b)...)})
			}
			if theirs.MainThreadLane && mine.MainThreadLane {
				out = append(out, finding{key: "lane " + name + " " + b.Process, settle: true, msg: msgLane,
					fields: append([]zap.Field{zap.String("backend", name)}, other(b)...)})
			}
		}
		// With instances that disagree, that is the mistake to fix first.
		if agree && gateways > mine.Instances {
			out = append(out, finding{key: "gateways " + name + " " + strconv.Itoa(gateways), settle: true, msg: msgGateways,
				fields: []zap.Field{zap.String("backend", name), zap.Int("instances", mine.Instances), zap.Int("gateways", gateways)}})
		}
	}
	for _, id := range unclaimed {
		out = append(out, finding{key: "state " + id, settle: true, msg: msgUnclaimedState,
			fields: []zap.Field{zap.String("other_instance_id", id), zap.String("key", rateLimitPrefix+"/"+id+".rlstate")}})
	}
	return out
}

func backendNames(bs []Backend) []string {
	names := make([]string, 0, len(bs))
	for _, b := range bs {
		names = append(names, b.Name)
	}
	return names
}
