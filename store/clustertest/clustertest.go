// Package clustertest starts a MariaDB Galera cluster on loopback, for the
// tests that run Turnstile on more than one database server and for
// cmd/devcluster: Debian's mariadb-server and galera-4, state transfers by
// rsync, every node in a folder of its own under one temporary directory.
//
// Every node, and its installation, has a tmpdir of its own: a MariaDB
// server deletes at start every "#sql" file in its tmpdir, which in the
// shared /tmp are the temporary tables of the other servers on the
// machine (seen here: the server on 3306 failing its queries, and dying
// of signal 11, after a node started).
//
// A test binary starts one cluster for all its tests (a start costs tens of
// seconds) and stops it when its tests are done; each test makes databases
// of its own on it, as on a single server.
package clustertest

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver the nodes are asked through
)

// Provider is where Debian's galera-4 puts the wsrep provider.
const Provider = "/usr/lib/galera/libgalera_smm.so"

// Missing names what this machine lacks to run a cluster, with the command
// that installs it, or is "" when nothing is missing.
func Missing() string {
	var missing []string
	for _, name := range []string{"mariadbd", "mariadb-install-db", "rsync"} {
		if _, err := lookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if _, err := os.Stat(Provider); err != nil {
		missing = append(missing, Provider)
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, ", ") + " not found: apt-get install mariadb-server galera-4 rsync"
}

// lookPath finds a program on PATH or in /usr/sbin, which a non-root PATH
// often lacks and where Debian puts mariadbd.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return exec.LookPath(filepath.Join("/usr/sbin", name))
}

// Cluster is a running cluster.
type Cluster struct {
	dir   string
	nodes []*Node
}

// Node is one member: a mariadbd with its own data folder and ports.
type Node struct {
	name, conf, port string
	dir              string
	log              *syncBuffer
	cmd              *exec.Cmd
	done             chan struct{}
}

// Start creates and starts a cluster of n nodes: the first bootstraps it,
// each other joins by a state transfer from it. It returns once every
// node reports itself synced in a cluster of n.
func Start(ctx context.Context, n int) (*Cluster, error) {
	if m := Missing(); m != "" {
		return nil, errors.New("clustertest: " + m)
	}
	// A short path: a unix socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "tsgalera-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	if err := c.start(ctx, n); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, n int) error {
	// As root, mariadbd must run as mysql: rsync's daemon, which serves a
	// joiner's state transfer, drops a root caller's rights to nobody, who
	// cannot read the data folders.
	owner, err := dataOwner()
	if err != nil {
		return err
	}
	ports, err := freePorts(4 * n)
	if err != nil {
		return err
	}
	var gcomm []string
	for i := range n {
		gcomm = append(gcomm, "127.0.0.1:"+ports[4*i+1])
	}
	for i := range n {
		nd := &Node{name: "n" + strconv.Itoa(i+1), port: ports[4*i], log: &syncBuffer{}}
		nd.dir = filepath.Join(c.dir, nd.name)
		nd.conf = filepath.Join(nd.dir, "my.cnf")
		for _, sub := range []string{"data", "tmp"} {
			if err := os.MkdirAll(filepath.Join(nd.dir, sub), 0o755); err != nil {
				return err
			}
		}
		conf := fmt.Sprintf(`[mariadbd]
datadir=%[1]s/data
socket=%[1]s/sock
pid-file=%[1]s/pid
tmpdir=%[1]s/tmp
port=%[2]s
bind-address=127.0.0.1
%[3]s
log-error=%[1]s/error.log
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
max_connections=500
wsrep_on=ON
wsrep_provider=%[4]s
wsrep_cluster_name=turnstile-test
wsrep_node_address=127.0.0.1
wsrep_node_name=%[5]s
wsrep_sst_method=rsync
wsrep_cluster_address=gcomm://%[6]s
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%[7]s;ist.recv_addr=127.0.0.1:%[8]s;gcache.size=64M"
wsrep_sst_receive_address=127.0.0.1:%[9]s
`, nd.dir, nd.port, owner.line, Provider, nd.name, strings.Join(gcomm, ","), ports[4*i+1], ports[4*i+2], ports[4*i+3])
		if err := os.WriteFile(nd.conf, []byte(conf), 0o644); err != nil {
			return err
		}
		c.nodes = append(c.nodes, nd)
	}
	if err := owner.chown(c.dir); err != nil {
		return err
	}
	first := c.nodes[0]
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal",
		"--datadir="+filepath.Join(first.dir, "data"), "--tmpdir="+filepath.Join(first.dir, "tmp"), "--skip-test-db", "--user="+owner.name)
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("clustertest: mariadb-install-db: %v\n%s", err, out)
	}
	// Joiners one at a time: a donor serves one state transfer at once.
	for i, nd := range c.nodes {
		if err := nd.start(ctx, i == 0); err != nil {
			return err
		}
		if err := nd.waitSynced(ctx, i+1); err != nil {
			return err
		}
	}
	return nil
}

// owner is the user mariadbd runs as and the config line that says so.
type owner struct {
	name, line string
	uid, gid   int
}

func dataOwner() (owner, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return owner{}, err
		}
		return owner{name: u.Username, uid: -1}, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return owner{}, fmt.Errorf("clustertest: as root, mariadbd runs as the mysql user, which is missing (%v); the mariadb-server package creates it", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return owner{name: "mysql", line: "user=mysql", uid: uid, gid: gid}, nil
}

// chown gives every file under dir to the owner; a non-root owner already
// has them.
func (o owner) chown(dir string) error {
	if o.uid < 0 {
		return nil
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, o.uid, o.gid)
	})
}

// freePorts returns n loopback ports that nothing listened on a moment ago.
func freePorts(n int) ([]string, error) {
	var ports []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		ports = append(ports, port)
	}
	return ports, nil
}

// DSN is the DSN (go-sql-driver syntax) of a database on node i (from 0).
func (c *Cluster) DSN(i int, database string) string {
	return "root@tcp(127.0.0.1:" + c.nodes[i].port + ")/" + database
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// Kill ends node i's mariadbd with SIGKILL, as a crash would, and waits
// until it is gone.
func (c *Cluster) Kill(i int) error {
	nd := c.nodes[i]
	if err := nd.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("clustertest: kill %s: %w", nd.name, err)
	}
	<-nd.done
	return nil
}

// Rejoin starts node i again after Kill and returns once it is synced with
// the others: it rejoins by a state transfer from one of them.
func (c *Cluster) Rejoin(ctx context.Context, i int) error {
	nd := c.nodes[i]
	if err := nd.start(ctx, false); err != nil {
		return err
	}
	return nd.waitSynced(ctx, len(c.nodes))
}

// WaitSynced returns once every running node reports itself synced in a
// cluster of want nodes.
func (c *Cluster) WaitSynced(ctx context.Context, want int) error {
	for _, nd := range c.nodes {
		if nd.running() {
			if err := nd.waitSynced(ctx, want); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop ends every node and removes the cluster's folder.
func (c *Cluster) Stop() {
	for _, nd := range c.nodes {
		if nd.running() {
			nd.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-nd.done:
			case <-time.After(30 * time.Second):
				nd.cmd.Process.Kill()
				<-nd.done
			}
		}
	}
	os.RemoveAll(c.dir)
}

func (nd *Node) running() bool {
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// start starts mariadbd on the node's config, which must be named by an
// absolute path: the state transfer script reads it again.
func (nd *Node) start(ctx context.Context, bootstrap bool) error {
	server, err := lookPath("mariadbd")
	if err != nil {
		return err
	}
	args := []string{"--defaults-file=" + nd.conf}
	if bootstrap {
		args = append(args, "--wsrep-new-cluster")
	}
	nd.cmd = exec.Command(server, args...)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.log, nd.log
	if err := nd.cmd.Start(); err != nil {
		return fmt.Errorf("clustertest: start %s: %w", nd.name, err)
	}
	done := make(chan struct{})
	nd.done = done
	go func() { nd.cmd.Wait(); close(done) }()
	return nil
}

// waitSynced polls the node until it answers, is synced, and sees a
// cluster of want nodes; a state transfer can take a minute on a busy
// machine.
func (nd *Node) waitSynced(ctx context.Context, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:"+nd.port+")/")
	if err != nil {
		return err
	}
	defer db.Close()
	var last error
	for {
		state, size, err := status(ctx, db)
		if err == nil && state == "Synced" && size == want {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("state %q, cluster size %d", state, size)
		}
		last = err
		select {
		case <-nd.done:
			return fmt.Errorf("clustertest: %s exited before it was synced: %v\n%s", nd.name, last, nd.errorLog())
		case <-ctx.Done():
			return fmt.Errorf("clustertest: %s not synced in a cluster of %d: %v\n%s", nd.name, want, last, nd.errorLog())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func status(ctx context.Context, db *sql.DB) (state string, size int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state_comment', 'wsrep_cluster_size')`)
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return "", 0, err
		}
		if name == "wsrep_local_state_comment" {
			state = value
		} else {
			size, _ = strconv.Atoi(value)
		}
	}
	return state, size, rows.Err()
}

// errorLog is the end of the node's error log and output, for a failure's
// message.
func (nd *Node) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(nd.dir, "error.log"))
	b = append(b, nd.log.Bytes()...)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// syncBuffer collects a node's output while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
