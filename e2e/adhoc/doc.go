// Package adhoc tests tools as ad-hoc commands end to end: slixmpp, Converse.js in a browser, hidden endpoints, federation.
package adhoc
