package main

import (
	"context"
	"crypto/tls"

	"github.com/agentgw/agentgw/accbridge"
	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
)

// checkACC checks an [agents.acc] endpoint: the listener's key material
// loads and its connector is enrolled and not revoked. Whether the
// connector is connected is only known to the running gateway.
func (d *doctor) checkACC(ctx context.Context, cfg *config.Config, a config.Agent, accs accdb.Driver, what string) {
	f := gateway.ACCFiles(cfg)
	if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
		d.fail(what, "ACC server certificate: %s — run `agentgw acc init`", lastPart(err))
		return
	}
	if _, err := accbridge.ReadCert(f.CA); err != nil {
		d.fail(what, "ACC connector CA: %s — run `agentgw acc init`", lastPart(err))
		return
	}
	if _, err := accbridge.ReadKey(f.JWTKey); err != nil {
		d.fail(what, "ACC JWT key: %s — run `agentgw acc init`", lastPart(err))
		return
	}
	if accs == nil {
		return // no store to read (doctor reported why)
	}
	c, ok, err := accs.Connector(ctx, a.ACC.Connector)
	switch {
	case err != nil:
		d.fail(what, "cannot read the ACC connectors: %s", lastPart(err))
	case !ok:
		d.fail(what, "connector %q is not enrolled — run `agentgw acc enroll --name %s`", a.ACC.Connector, a.ACC.Connector)
	case c.Revoked():
		d.fail(what, "connector %q was revoked at %s — enroll another name", a.ACC.Connector, c.RevokedAt)
	default:
		d.ok(what, "ACC key material loads; connector %q (%s) is enrolled", c.Name, c.ID)
	}
}
