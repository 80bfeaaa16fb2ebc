// CoreDNS with only the plugins the real node's Corefile uses (scripts/cluster/node.sh), so that it
// builds in seconds from the control plane's packages instead of compiling every cloud plugin.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	// The order plugins handle a query in: upstream's plugin.cfg order, restricted to the above.
	dnsserver.Directives = []string{"bind", "health", "errors", "cache", "kubernetes", "forward"}
}

func main() {
	coremain.Run()
}
