package component

import (
	"context"
	"crypto/sha1" // #nosec G505: XEP-0114 §3 defines the handshake as SHA-1
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stream"
)

// The XEP-0114 handshake, as mellium's component.Negotiator does it but
// with our own stream header: mellium's cannot carry Openfire's
// allowMultiple attribute, which a cluster's members need on Openfire.

// streamHeader is the component's opening stream tag. allowMultiple adds
// Openfire's non-standard opt-in for several sessions on one domain
// (LocalComponentSession.createSession only checks that it is present);
// ejabberd and Prosody ignore an unknown attribute on the header.
func streamHeader(domain jid.JID, allowMultiple bool) string {
	var b strings.Builder
	b.WriteString(`<stream:stream xmlns='` + NSComponent + `' xmlns:stream='` + stream.NS + `' to='`)
	_ = xml.EscapeText(&b, []byte(domain.Domain().String()))
	b.WriteString(`'`)
	if allowMultiple {
		b.WriteString(` allowMultiple='true'`)
	}
	b.WriteString(`>`)
	return b.String()
}

// handshakeDigest is XEP-0114's hex SHA-1 of the stream id and the secret.
func handshakeDigest(streamID string, secret []byte) string {
	h := sha1.New() // #nosec G401
	h.Write([]byte(streamID))
	h.Write(secret)
	return hex.EncodeToString(h.Sum(nil))
}

// newSession opens the component stream on rw and authenticates.
func newSession(ctx context.Context, domain jid.JID, secret []byte, allowMultiple bool, rw io.ReadWriter) (*xmpp.Session, error) {
	domain = domain.Domain()
	return xmpp.NewSession(ctx, domain, domain, rw, 0, negotiator(domain, secret, allowMultiple))
}

func negotiator(domain jid.JID, secret []byte, allowMultiple bool) xmpp.Negotiator {
	return func(ctx context.Context, in, out *stream.Info, s *xmpp.Session, _ interface{}) (xmpp.SessionState, io.ReadWriter, interface{}, error) {
		r := s.TokenReader()
		defer r.Close()
		d := xml.NewTokenDecoder(r)
		if _, err := io.WriteString(s.Conn(), streamHeader(domain, allowMultiple)); err != nil {
			return 0, nil, nil, err
		}
		out.To = domain
		out.XMLNS = NSComponent

		var start xml.StartElement
		seenProc := false
	header:
		for {
			tok, err := d.Token()
			if err != nil {
				return 0, nil, nil, err
			}
			switch t := tok.(type) {
			case xml.ProcInst:
				if seenProc {
					return 0, nil, nil, errors.New("component: unexpected processing instruction from the server")
				}
				seenProc = true
			case xml.CharData:
				if len(strings.TrimSpace(string(t))) != 0 {
					return 0, nil, nil, errors.New("component: unexpected text before the server's stream header")
				}
			case xml.StartElement:
				start = t
				break header
			default:
				return 0, nil, nil, errors.New("component: unexpected token before the server's stream header")
			}
		}
		if start.Name.Local != "stream" || start.Name.Space != stream.NS {
			return 0, nil, nil, errors.New("component: the server did not open a stream")
		}
		if err := in.FromStartElement(start); err != nil {
			return 0, nil, nil, err
		}
		var id string
		for _, a := range start.Attr {
			if a.Name.Local == "id" && a.Name.Space == "" {
				id = a.Value
			}
		}
		if _, err := fmt.Fprintf(s.Conn(), `<handshake>%s</handshake>`, handshakeDigest(id, secret)); err != nil {
			return 0, nil, nil, err
		}
		for {
			tok, err := d.Token()
			if err != nil {
				return 0, nil, nil, err
			}
			start, ok := tok.(xml.StartElement)
			if !ok {
				if cd, isText := tok.(xml.CharData); isText && len(strings.TrimSpace(string(cd))) == 0 {
					continue // whitespace keepalive
				}
				return 0, nil, nil, errors.New("component: expected the handshake answer or a stream error")
			}
			switch {
			case start.Name.Local == "error":
				var e stream.Error
				if err := d.DecodeElement(&e, &start); err != nil {
					return 0, nil, nil, err
				}
				return 0, nil, nil, e
			case start.Name.Local == "handshake":
				if id == "" {
					return 0, nil, nil, errors.New("component: the server's stream header has no id")
				}
				return xmpp.Ready | xmpp.Authn, nil, nil, d.Skip()
			}
			return 0, nil, nil, fmt.Errorf("component: unexpected element %q during the handshake", start.Name.Local)
		}
	}
}
