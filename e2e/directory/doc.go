// Package directory tests discovery end to end: manifests, slixmpp and ejabberd clients, xml:lang, catalog push.
package directory
