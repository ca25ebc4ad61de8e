// Command devcluster starts a 3-node MariaDB Galera cluster on loopback
// (store/clustertest: Debian's mariadb-server, galera-4 and rsync), prints
// one DSN per node on stdout, and runs until interrupted, then stops the
// nodes and removes their data. It is how the deployment guide's cluster
// figures were measured; the tests start their own cluster.
//
//	go run ./cmd/devcluster            # three nodes
//	go run ./cmd/devcluster -nodes 5
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/turnstile-dev/turnstile/store/clustertest"
)

func main() {
	nodes := flag.Int("nodes", 3, "how many nodes")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "devcluster: starting %d nodes (a state transfer each; about a minute)\n", *nodes)
	c, err := clustertest.Start(ctx, *nodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
	for i := range c.Size() {
		fmt.Println(c.DSN(i, ""))
	}
	fmt.Fprintln(os.Stderr, "devcluster: synced; Ctrl-C stops the cluster and removes its data")
	<-ctx.Done()
	c.Stop()
}
