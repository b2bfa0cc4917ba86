-- agentgw: Prosody side of the gateway's XEP-0114 component connection.
--
-- Drop this file into /etc/prosody/conf.d/ (Debian's prosody.cfg.lua ends
-- with Include "conf.d/*.cfg.lua"), or Include it yourself. An included file
-- starts in the global section, so the two port settings below are global.
-- Replace the placeholders: {{.ComponentPort}} is the port agentgw's
-- [xmpp] server setting points at (Prosody's default is 5347), and the secret
-- must equal the one agentgw reads from secret_env / secret_file.
-- The agentgw test suite renders and loads this very file.

-- Send small stanzas at once instead of waiting for delayed ACKs (Nagle's
-- algorithm). Measured through this test suite: an MCP call relayed by the
-- gateway took 44 ms with Prosody's default and 2.9 ms with this. It applies
-- to all of Prosody's sockets; drop it if you must keep the default.
network_settings = { nagle = false }

-- Listen for components on loopback only: the handshake is a shared secret.
component_ports = { {{.ComponentPort}} }
component_interfaces = { "{{.ComponentInterface}}" }

Component "{{.ComponentDomain}}"
	component_secret = "{{.ComponentSecret}}"
	-- Manifests may be up to 1 MiB; the default limit is 512 KiB.
	component_stanza_size_limit = 4 * 1024 * 1024
