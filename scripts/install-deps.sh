#!/usr/bin/env bash
# Installs what agentgw's tests, demo and benchmarks need: Prosody (with
# lua-unbound for federation), ejabberd, slixmpp, openssl, PostgreSQL (the
# postgres driver's tests start private servers from its binaries), Chromium
# (the Converse.js browser test), and the npm test
# tools from package-lock.json. Idempotent: it only touches what is missing
# or stale, so a second run on a ready machine does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium: headless browser for the Converse.js ad-hoc commands test
# (TestAdhocConverseBrowser, driven by npm puppeteer-core).
APT_PACKAGES=(prosody lua-unbound ejabberd python3-slixmpp openssl postgresql chromium)

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# retry runs a command that fetches from the network up to 3 times: a
# fresh CI machine must not fail on one dropped connection to a mirror.
retry() {
	local n
	for n in 1 2 3; do
		"$@" && return 0
		[ "$n" = 3 ] && break
		echo "install-deps: '$*' failed (attempt $n of 3); retrying in $((n * 10)) s" >&2
		sleep $((n * 10))
	done
	return 1
}

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for p in "${APT_PACKAGES[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "install-deps: apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	retry as_root apt-get update -qq
	# The packages must not start system services: the tests run private
	# instances on their own ports.
	policy=/usr/sbin/policy-rc.d
	created_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
		as_root chmod +x "$policy"
		created_policy=1
		trap 'as_root rm -f "$policy"' EXIT
	fi
	retry as_root apt-get install -y -qq --no-install-recommends -o Acquire::Retries=3 "${missing[@]}"
	if [ -n "$created_policy" ]; then
		as_root rm -f "$policy"
		trap - EXIT
	fi
else
	echo "install-deps: apt packages present"
fi

# Node.js >= 20.10 is needed by @xmpp/client; it comes with the machine.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "install-deps: node and npm are required (Node.js >= 20.10)" >&2
	exit 1
fi
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=10)?0:1)'; then
	echo "install-deps: Node.js $(node --version) is too old; @xmpp/client needs >= 20.10" >&2
	exit 1
fi

# node_modules is current when every package of the lock file is installed
# at its locked version (optional, platform-specific ones may be absent).
# The check reads the installed tree, not modification times: a fresh git
# checkout makes package-lock.json newer than any node_modules.
node_modules_current() {
	[ -d node_modules ] || return 1
	node -e '
		const fs = require("fs");
		const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages || {};
		for (const [path, p] of Object.entries(lock)) {
			if (path === "" || p.link) continue;
			let v;
			try { v = JSON.parse(fs.readFileSync(path + "/package.json", "utf8")).version; } catch { v = undefined; }
			if (v !== p.version && !(v === undefined && p.optional)) process.exit(1);
		}'
}

if [ -f package-lock.json ]; then
	if node_modules_current; then
		echo "install-deps: node_modules up to date"
	elif [ -L node_modules ]; then
		# npm ci would empty the link's target, which other checkouts
		# share, and replace the link: leave it to its owner.
		echo "install-deps: node_modules is a link to $(readlink node_modules) and does not match package-lock.json; not reinstalling through it (run npm ci there)" >&2
	else
		echo "install-deps: npm ci"
		retry npm ci --no-audit --no-fund --loglevel=error
	fi
elif [ -f package.json ]; then
	echo "install-deps: no package-lock.json; npm install"
	npm install --no-audit --no-fund --loglevel=error
fi

# The Go modules, fetched once here with retries rather than by the first
# go command of the test run.
if [ -f go.mod ] && command -v go >/dev/null; then
	if retry go mod download; then
		echo "install-deps: go modules present"
	else
		echo "install-deps: go mod download failed" >&2
		exit 1
	fi
fi
