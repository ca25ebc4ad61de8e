package webhook

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Targets. A notification's URL is written by whoever writes
// configurations, and the workers POST to it from inside the network
// Turnstile runs in: without a rule, a URL could reach the cloud's
// metadata service, the database's admin port or anything else only this
// machine can reach. So, unless Options.AllowPrivate
// (--webhook-allow-private), no connection is made to a loopback,
// link-local, private, unspecified or reserved address, nor to an address
// of this machine's interfaces. The check is made on the address the
// connection is opened to, after the name is resolved, so a name that
// resolves to a public address when a person looks and to 127.0.0.1 when
// the worker dials (DNS rebinding) gains nothing; localhost and its
// subdomains are this machine whatever the resolver says. Redirects are
// never followed, and no proxy is used, so the address checked is the
// address reached.

// Resolver looks a name up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// refusedError is a target refused before any connection. Its message
// says why without the address: the URL may be a credential.
type refusedError struct{ why string }

func (e *refusedError) Error() string {
	return "target refused: " + e.why + "; start with --webhook-allow-private to allow it"
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	cgnat       = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598; some clouds serve metadata there
	protocol4   = netip.MustParsePrefix("192.0.0.0/24")  // IETF protocol assignments
	benchmark4  = netip.MustParsePrefix("198.18.0.0/15")
	reserved4   = netip.MustParsePrefix("240.0.0.0/4") // the broadcast address too
	siteLocal6  = netip.MustParsePrefix("fec0::/10")
	nat64       = netip.MustParsePrefix("64:ff9b::/96") // an IPv4 address behind a NAT64 gateway
)

// classify says why a may not be a notification's target ("a loopback
// address"), or "" when it may.
func classify(a netip.Addr) string {
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		return classify(netip.AddrFrom4([4]byte(b[12:])))
	}
	switch {
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsPrivate() || cgnat.Contains(a) || siteLocal6.Contains(a):
		return "a private address"
	case a.IsMulticast() || protocol4.Contains(a) || benchmark4.Contains(a) || reserved4.Contains(a):
		return "a reserved address"
	}
	return ""
}

// localhostName reports whether host names this machine by definition
// (RFC 6761): localhost and every name under it, with or without the
// final dot.
func localhostName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// LiteralRefusal says why a URL's host is refused before any lookup:
// an address that classify refuses, or a localhost name ("a loopback
// address"); "" for any other host, a name being checked on the
// addresses it resolves to when it is dialled. It is for warnings, the
// dial is the rule.
func LiteralRefusal(host string) string {
	if localhostName(host) {
		return "a loopback address"
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return classify(a)
	}
	return ""
}

var localhostAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}

// dialer opens the webhook client's connections, to checked addresses
// only.
type dialer struct {
	net      net.Dialer
	resolver Resolver
	allow    bool
}

// DialContext resolves address's host, then connects to the first of its
// addresses that may be a target and answers. When every address is
// refused the error is a *refusedError; when some address was tried, the
// error of the last attempt.
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, errors.New("the port is not a number")
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var refused, last error
	for _, a := range addrs {
		if why := d.refuse(a); why != "" {
			if refused == nil {
				refused = &refusedError{why}
			}
			continue
		}
		c, err := d.net.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	if last != nil {
		return nil, last
	}
	if refused != nil {
		return nil, refused
	}
	return nil, &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
}

// lookup is host's addresses: an address as it is, localhost names as
// the loopback addresses, other names as the resolver answers.
func (d *dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if localhostName(host) {
		return localhostAddrs, nil
	}
	return d.resolver.LookupNetIP(ctx, "ip", host)
}

// refuse says why a may not be dialled, or "" (always "" with
// AllowPrivate).
func (d *dialer) refuse(a netip.Addr) string {
	if d.allow {
		return ""
	}
	if why := classify(a); why != "" {
		return why
	}
	if ownAddress(a) {
		return "an address of this host"
	}
	return ""
}

// ownAddress reports whether a is an address of one of this machine's
// interfaces (a public one: the others are refused already). It asks the
// kernel each time, which costs a few microseconds per connection and
// follows addresses that change.
func ownAddress(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if own, ok := netip.AddrFromSlice(n.IP); ok && own.Unmap() == a {
				return true
			}
		}
	}
	return false
}
