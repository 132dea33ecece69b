package caddymodule

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestNetworkCaddyfile checks the network block's forms and the JSON each
// becomes: a member is declared into the same JSON as statusgate
// <upstream> declares a backend, so that both name one guard.
func TestNetworkCaddyfile(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"three servers and self",
			"statusgate 10.0.0.2:8080 {\n\tenable network\n\tnetwork main {\n\t\tserver survival 10.0.0.2:8080\n\t\tserver lobby    10.0.0.3:8080\n\t\tserver creative 10.0.0.4:8080\n\t\tself   survival\n\t}\n}",
			`{"endpoints":{"network":true},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]},"network":{"cluster":"main","servers":[` +
				`{"id":"survival","proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]}},` +
				`{"id":"lobby","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}},` +
				`{"id":"creative","proxy":{"upstreams":[{"dial":"10.0.0.4:8080"}]}}],"self":"survival"}}`},
		{"a server of two upstreams, with reverse_proxy's subdirectives",
			"statusgate 10.0.0.2:8080 {\n\tenable network\n\tnetwork main {\n\t\tserver lobby 10.0.0.3:8080 http://10.0.0.5:8080 {\n\t\t\theader_up Host lobby.internal\n\t\t\tlb_policy first\n\t\t}\n\t}\n}",
			`{"endpoints":{"network":true},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]},"network":{"cluster":"main","servers":[` +
				`{"id":"lobby","proxy":{"load_balancing":{"selection_policy":{"policy":"first"}},"upstreams":[{"dial":"10.0.0.3:8080"},{"dial":"10.0.0.5:8080"}],"headers":{"request":{"set":{"Host":["lobby.internal"]}}}}}]}}`},
		{"self, with the statusgate line's upstreams and a proxy block of its own",
			"statusgate 10.0.0.2:8080 {\n\tproxy {\n\t\theader_up Host survival.internal\n\t}\n\tnetwork main {\n\t\tserver survival 10.0.0.2:8080\n\t\tself survival\n\t}\n\tenable network\n}",
			`{"endpoints":{"network":true},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}],"headers":{"request":{"set":{"Host":["survival.internal"]}}}},"network":{"cluster":"main","servers":[` +
				`{"id":"survival","proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]}}],"self":"survival"}}`},
		{"the form of 1.0: self is not compared",
			"statusgate {\n\tenable network\n\tnetwork main {\n\t\tserver survival 10.0.0.9:8080\n\t\tself survival\n\t}\n}",
			`{"endpoints":{"network":true},"network":{"cluster":"main","servers":[{"id":"survival","proxy":{"upstreams":[{"dial":"10.0.0.9:8080"}]}}],"self":"survival"}}`},
		{"network switched off on purpose",
			"statusgate 10.0.0.2:8080 {\n\tdisable network\n\tnetwork main {\n\t\tserver lobby 10.0.0.3:8080\n\t}\n}",
			`{"endpoints":{"network":false},"proxy":{"upstreams":[{"dial":"10.0.0.2:8080"}]},"network":{"cluster":"main","servers":[{"id":"lobby","proxy":{"upstreams":[{"dial":"10.0.0.3:8080"}]}}]}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parseTestCaddyfile(tc.input)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("JSON:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestNetworkCaddyfileErrors checks every mistake of a network block: the
// message names the word and what to write, at the line of the word.
func TestNetworkCaddyfileErrors(t *testing.T) {
	const head = "statusgate 10.0.0.2:8080 {\n\tenable network\n" // the block's lines start at line 3
	tests := []struct {
		name  string
		lines string // from line 3
		words []string
		line  int
	}{
		{"no cluster", "network {\n\t\tserver a 10.0.0.3:8080\n\t}", []string{"network: name the network: network <cluster-id>"}, 3},
		{"a cluster id that is no name", "network ma.in {\n\t\tserver a 10.0.0.3:8080\n\t}", []string{"network: 'ma.in' is not a name of letters, digits, '_' and '-'"}, 3},
		{"two cluster ids", "network main eu {\n\t\tserver a 10.0.0.3:8080\n\t}", []string{"wrong argument count", "'eu'"}, 3},
		{"no block", "network main", []string{"network main: no servers: list each member as server <server-id> <upstream>..."}, 3},
		{"no servers", "network main {\n\t\tself a\n\t}", []string{"network main: no servers"}, 3},
		{"network twice", "network main {\n\t\tserver a 10.0.0.3:8080\n\t}\n\tnetwork eu {\n\t\tserver b 10.0.0.4:8080\n\t}", []string{"'network' given twice"}, 6},
		{"an unknown word", "network main {\n\t\tserver a 10.0.0.3:8080\n\t\tservers b 10.0.0.4:8080\n\t}", []string{"unrecognized network subdirective 'servers'"}, 5},

		{"a server without id", "network main {\n\t\tserver\n\t}", []string{"server: name the server and its upstream(s): server <server-id> <upstream>..."}, 4},
		{"a server with only a block", "network main {\n\t\tserver lobby {\n\t\t\tto 10.0.0.3:8080\n\t\t}\n\t}", []string{"server lobby: a block without upstreams: write server lobby <upstream>... { ... }, or declare lobby once in the global statusgate option"}, 4},
		{"a server id that is no name", "network main {\n\t\tserver lobby/1 10.0.0.3:8080\n\t}", []string{"server: 'lobby/1' is not a name of letters, digits, '_' and '-'"}, 4},
		{"a server id twice", "network main {\n\t\tserver lobby 10.0.0.3:8080\n\t\tserver lobby 10.0.0.4:8080\n\t}", []string{"server lobby: given twice"}, 5},
		{"one backend under two ids", "network main {\n\t\tserver lobby 10.0.0.3:8080\n\t\tserver hub 10.0.0.3:8080\n\t}", []string{"server hub: 10.0.0.3:8080 is the server that server lobby declares as 10.0.0.3:8080", "count its players twice"}, 5},
		{"one backend under two spellings", "network main {\n\t\tserver lobby localhost:8080 127.0.0.1:9090\n\t\tserver hub 127.0.0.1:9090 [::ffff:127.0.0.1]:8080\n\t}", []string{"server hub: 127.0.0.1:9090 [::ffff:127.0.0.1]:8080 is the server that server lobby declares as localhost:8080 127.0.0.1:9090", "count its players twice"}, 5},
		{"a member picked by the request", "network main {\n\t\tserver lobby {http.request.header.X-Lobby}\n\t}", []string{"server lobby: {http.request.header.X-Lobby} picks the server for each request", "a member is a fixed server"}, 4},
		{"a bad upstream", "network main {\n\t\tserver lobby ws://10.0.0.3:8080\n\t}", []string{"ws://"}, 4},
		{"handle_response in a server's block", "network main {\n\t\tserver lobby 10.0.0.3:8080 {\n\t\t\thandle_response {\n\t\t\t\trespond 200\n\t\t\t}\n\t\t}\n\t}", []string{"server: 'handle_response' is not allowed here"}, 5},
		{"a bad subdirective in a server's block", "network main {\n\t\tserver lobby 10.0.0.3:8080 {\n\t\t\tbogus\n\t\t}\n\t}", []string{"bogus"}, 5},

		{"self without id", "network main {\n\t\tserver a 10.0.0.2:8080\n\t\tself\n\t}", []string{"self: name the server that is this statusgate's own backend"}, 5},
		{"self twice", "network main {\n\t\tserver a 10.0.0.2:8080\n\t\tself a\n\t\tself a\n\t}", []string{"'self' given twice"}, 6},
		{"self with two ids", "network main {\n\t\tserver a 10.0.0.2:8080\n\t\tself a b\n\t}", []string{"wrong argument count", "'b'"}, 5},
		{"self no server", "network main {\n\t\tself b\n\t\tserver a 10.0.0.2:8080\n\t}", []string{"self: 'b' is no server of network main"}, 4},
		{"self with other upstreams", "network main {\n\t\tserver a 10.0.0.3:8080\n\t\tself a\n\t}", []string{"self a: self names the server the statusgate line fronts, and server a declares 10.0.0.3:8080, and this statusgate's backend is 10.0.0.2:8080", "same upstreams"}, 5},

		{"a cache time of the network's own", "cache network 2s\n\tnetwork main {\n\t\tserver a 10.0.0.3:8080\n\t}", []string{"network main: cache network: the gateway answers network from the members' /status", "set cache status instead"}, 4},
		{"a snapshot time of the network's own", "network main {\n\t\tserver a 10.0.0.3:8080\n\t}\n\tsnapshot network 2s", []string{"network main: snapshot network", "set snapshot status instead"}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTestCaddyfile(head + "\t" + tc.lines + "\n}")
			wantErrorWords(t, err, tc.words...)
			if at := fmt.Sprintf(", at Testfile:%d", tc.line); err != nil && !strings.HasSuffix(err.Error(), at) {
				t.Errorf("error %q does not end with %q", err, at)
			}
		})
	}

	// The endpoint left off, its default: a network that answers nothing.
	_, err := parseTestCaddyfile("statusgate 10.0.0.2:8080 {\n\tnetwork main {\n\t\tserver a 10.0.0.3:8080\n\t}\n}")
	wantErrorWords(t, err, "network main: the network endpoint is off (its default)", "enable network", ", at Testfile:2")
	// An option word on the statusgate line.
	_, err = parseTestCaddyfile("statusgate network main")
	wantErrorWords(t, err, "'network' is an option, not an upstream", ", at Testfile:1")
}
