package host_test

import (
	"reflect"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/host"
)

// *host.Host's exported methods are the api.Host it implements plus the
// few a host's owner needs beside it: callbacks for the process manager
// (running a tool process, hearing that a process ended) are adapters
// the host attaches, not methods a user of the package can call.
func TestHostMethodsAreItsAPI(t *testing.T) {
	extra := map[string]bool{
		"Close":            true, // the owner shuts the host down
		"Drain":            true, // the owner shuts the host down gracefully, handing its runs over
		"Processes":        true, // the manager the owner configured
		"SubscribeEncoded": true, // rpc's optional fast path, found by type assertion
		"Metrics":          true, // the operator's metrics (weft serve's /metrics)
		"Wake":             true, // the work of a dispatch job (store/postgres.Waker), wired by the owner
		"HostLeases":       true, // the leases it took, for the owner's dispatcher to name the host
	}
	iface := reflect.TypeFor[api.Host]()
	typ := reflect.TypeFor[*host.Host]()
	for m := range typ.Methods() {
		if _, ok := iface.MethodByName(m.Name); !ok && !extra[m.Name] {
			t.Errorf("(*host.Host).%s is exported but is neither an api.Host method nor one the owner needs", m.Name)
		}
	}
}
