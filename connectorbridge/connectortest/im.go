package connectortest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// The IM network simulation (xAgent IM Profile v2, the connector's side).
// A test injects what a person wrote on the IM network (InjectMessage,
// with or without a file); the server pushes it as chat.message on the
// signed-in channel, keeps it until xAgent acknowledges it or it expires,
// and redelivers it on every channel.open and every RetryInterval. What
// xAgent sends (chat.message, files uploaded through POST /files/uploads)
// is recorded as Outbound, de-duplicated by message_id and acknowledged
// with chat.message.ack. Files for xAgent are cached and served at
// GET /files/refs/{file_ref} with no credentials, as §5.2 describes.

// IMFile is a file a person on the IM network sends.
type IMFile struct {
	Name     string
	MimeType string
	Data     []byte
	// DownloadURL overrides the served /files/refs URL (hostile tests:
	// another host).
	DownloadURL string
	// RedirectTo makes the served /files/refs URL redirect there (a
	// redirect off the connector's origin).
	RedirectTo string
}

// IMMessage is what a person on the IM network wrote.
type IMMessage struct {
	MessageID    string // default a new id
	Conversation string // default "conv_default"
	SenderID     string
	SenderName   string
	Text         string
	Files        []IMFile
	ExpiresAt    time.Time // zero: none sent (the gateway's default applies)
	ReplyTo      string    // reply_to_message_id: an earlier message's id
	// Raw, when set, is sent as the chat.message payload unchanged.
	Raw json.RawMessage
}

// OutboundFile is a file xAgent sent, resolved from its upload.
type OutboundFile struct {
	FileRef  string
	Filename string
	MimeType string
	Data     []byte
	SHA256   string
}

// OutboundMessage is a chat.message xAgent sent to the IM network.
type OutboundMessage struct {
	MessageID    string
	ChannelID    string
	Conversation string
	Text         string
	ReplyTo      string
	Files        []OutboundFile
}

// InboundAck is one chat.message.ack xAgent returned.
type InboundAck struct {
	MessageID string
	Code      string // error code; "" when accepted
	Status    string // payload status: accepted, rejected, failed
	Retryable bool   // error.retryable: retry later, not final
}

type imState struct {
	mu       sync.Mutex
	pending  map[string]*imPending // message_id → not yet acknowledged
	order    []string
	acked    map[string]bool
	acks     []InboundAck
	outbound []OutboundMessage
	outSeen  map[string]int // message_id → times received
	refs     map[string]imRef
	uploads  map[string]OutboundFile
	activity []string
}

type imPending struct {
	channel string
	payload json.RawMessage
	expires time.Time
	reqID   string
}

type imRef struct {
	channel string
	file    IMFile
}

func newIMState() *imState {
	return &imState{pending: map[string]*imPending{}, acked: map[string]bool{}, outSeen: map[string]int{},
		refs: map[string]imRef{}, uploads: map[string]OutboundFile{}}
}

// signedInChannel returns the first authenticated channel with a route.
func (s *Server) signedInChannel() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.channels))
	for id, ch := range s.channels {
		if ch.authenticated {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// InjectMessage makes a person on the IM network write m on the signed-in
// channel. It returns the message id, or "" when no channel is signed in.
// Delivery is asynchronous and repeated until xAgent acknowledges it.
func (s *Server) InjectMessage(m IMMessage) string {
	ch := s.signedInChannel()
	if ch == "" {
		return ""
	}
	if m.MessageID == "" {
		m.MessageID = newID("imsg_")
	}
	if m.Conversation == "" {
		m.Conversation = "conv_default"
	}
	payload := m.Raw
	if payload == nil {
		files := []map[string]any{}
		for _, f := range m.Files {
			ref := newID("fref_")
			s.im.mu.Lock()
			s.im.refs[ref] = imRef{channel: ch, file: f}
			s.im.mu.Unlock()
			u := f.DownloadURL
			if u == "" {
				u = "files/refs/" + ref // relative: xAgent resolves it against the base URL
			}
			files = append(files, map[string]any{"file_ref": ref, "download_url": u, "filename": f.Name,
				"mime_type": f.MimeType, "byte_size": len(f.Data), "file_type": "file"})
		}
		// The sender as the seeds carry it (seeds/000 §8.21): sender_id
		// and display_name at the top of the payload.
		pl := map[string]any{"message_id": m.MessageID, "conversation_id": m.Conversation, "text": m.Text}
		if m.SenderID != "" {
			pl["sender_id"] = m.SenderID
		}
		if m.SenderName != "" {
			pl["display_name"] = m.SenderName
		}
		if len(files) > 0 {
			pl["files"] = files
		}
		if !m.ExpiresAt.IsZero() {
			pl["expires_at"] = m.ExpiresAt.UnixMilli()
		}
		if m.ReplyTo != "" {
			pl["reply_to_message_id"] = m.ReplyTo
		}
		payload, _ = json.Marshal(pl)
	}
	s.im.mu.Lock()
	s.im.pending[m.MessageID] = &imPending{channel: ch, payload: payload, expires: m.ExpiresAt}
	s.im.order = append(s.im.order, m.MessageID)
	s.im.mu.Unlock()
	s.redeliver(ch)
	return m.MessageID
}

// SendActivity pushes chat.activity (typing and so on) on the signed-in
// channel.
func (s *Server) SendActivity(conversation, state string) bool {
	ch := s.signedInChannel()
	c := s.routeOf(ch)
	if c == nil {
		return false
	}
	raw, _ := json.Marshal(map[string]any{"conversation_id": conversation, "state": state})
	return c.write(&packet{Type: "chat.activity", ConnectorChannelID: strp(ch), Payload: raw}) == nil
}

func (s *Server) routeOf(ch string) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[ch]
	if c == nil {
		return nil
	}
	for r := range c.routes {
		return r
	}
	return nil
}

// redeliver pushes every unacknowledged, unexpired message of ch.
func (s *Server) redeliver(ch string) {
	c := s.routeOf(ch)
	if c == nil {
		return
	}
	now := time.Now()
	s.im.mu.Lock()
	var send []*packet
	for _, id := range s.im.order {
		p := s.im.pending[id]
		if p == nil || p.channel != ch {
			continue
		}
		if !p.expires.IsZero() && now.After(p.expires) {
			delete(s.im.pending, id)
			continue
		}
		p.reqID = newID("sreq_")
		send = append(send, &packet{RequestID: p.reqID, Type: "chat.message", ConnectorChannelID: strp(ch), Payload: p.payload})
	}
	s.im.mu.Unlock()
	for _, p := range send {
		c.write(p)
	}
}

func (s *Server) retryLoop() {
	t := time.NewTicker(s.o.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if ch := s.signedInChannel(); ch != "" {
				s.im.mu.Lock()
				n := len(s.im.pending)
				s.im.mu.Unlock()
				if n > 0 {
					s.redeliver(ch)
				}
			}
		}
	}
}

// chatAck takes xAgent's chat.message.ack for a pushed message.
func (c *conn) chatAck(p *packet) {
	var a struct {
		MessageID string `json:"message_id"`
		Status    string `json:"status"`
	}
	json.Unmarshal(p.Payload, &a)
	im := c.s.im
	im.mu.Lock()
	defer im.mu.Unlock()
	id := a.MessageID
	if id == "" { // an error ack names no message: find it by request id
		for mid, pend := range im.pending {
			if pend.reqID == p.RequestID {
				id = mid
			}
		}
	}
	code, retry := "", false
	if p.Error != nil {
		code, retry = p.Error.Code, p.Error.Retryable
	}
	im.acks = append(im.acks, InboundAck{MessageID: id, Code: code, Status: a.Status, Retryable: retry})
	if !retry {
		// terminal: accepted, or refused for good (an error without the
		// retryable marker is final)
		delete(im.pending, id)
		if code == "" {
			im.acked[id] = true
		}
	}
}

// chatMessage records xAgent's chat.message and acknowledges it.
func (c *conn) chatMessage(p *packet, ch *channel) {
	var m struct {
		MessageID      string `json:"message_id"`
		ConversationID string `json:"conversation_id"`
		Text           string `json:"text"`
		ReplyTo        string `json:"reply_to_message_id"`
		Files          []struct {
			FileRef  string `json:"file_ref"`
			Filename string `json:"filename"`
		} `json:"files"`
	}
	if err := json.Unmarshal(p.Payload, &m); err != nil || m.MessageID == "" {
		c.ackError(p, ch.id, "chat_message_rejected", "message_id is required")
		return
	}
	im := c.s.im
	im.mu.Lock()
	im.outSeen[m.MessageID]++
	first := im.outSeen[m.MessageID] == 1
	out := OutboundMessage{MessageID: m.MessageID, ChannelID: ch.id, Conversation: m.ConversationID, Text: m.Text, ReplyTo: m.ReplyTo}
	bad := false
	for _, f := range m.Files {
		up, ok := im.uploads[f.FileRef]
		if !ok {
			bad = true
			break
		}
		up.Filename = f.Filename
		out.Files = append(out.Files, up)
	}
	if first && !bad {
		im.outbound = append(im.outbound, out)
	}
	im.mu.Unlock()
	if bad {
		c.ackError(p, ch.id, "file_ref_not_found", "a file_ref is unknown or bound to another channel")
		return
	}
	c.ack(p, ch.id, map[string]any{"message_id": m.MessageID, "status": "delivered"})
}

// handleUpload is POST /files/uploads (§5.1).
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	chID := r.Header.Get("X-XAgent-Connector-Channel-ID")
	s.mu.Lock()
	ch := s.channels[chID]
	s.mu.Unlock()
	if ch == nil {
		http.Error(w, "unknown channel", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 32<<20)
	f, hdr, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "file field required", http.StatusBadRequest)
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		http.Error(w, "read failed", http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(data)
	ref := newID("out_")
	up := OutboundFile{FileRef: ref, Filename: hdr.Filename, MimeType: hdr.Header.Get("Content-Type"), Data: data, SHA256: hex.EncodeToString(sum[:])}
	s.im.mu.Lock()
	s.im.uploads[ref] = up
	s.im.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"file_ref": ref, "file_type": "file", "filename": hdr.Filename,
		"byte_size": len(data), "expires_at": time.Now().Add(time.Hour).UnixMilli()})
}

// handleFileRef is GET /files/refs/{file_ref} (§5.2). The path "redirect"
// followed by a ref redirects to the ref (a same-origin redirect).
func (s *Server) handleFileRef(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	if rest, ok := strings.CutPrefix(ref, "redirect-"); ok {
		http.Redirect(w, r, s.o.PathPrefix+"/files/refs/"+rest, http.StatusFound)
		return
	}
	s.im.mu.Lock()
	f, ok := s.im.refs[ref]
	s.im.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if f.file.RedirectTo != "" {
		http.Redirect(w, r, f.file.RedirectTo, http.StatusFound)
		return
	}
	if f.file.MimeType != "" {
		w.Header().Set("Content-Type", f.file.MimeType)
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+strings.ReplaceAll(f.file.Name, `"`, "_")+`"`)
	w.Write(f.file.Data)
}

// Outbound returns what xAgent sent to the IM network, once per message id.
func (s *Server) Outbound() []OutboundMessage {
	s.im.mu.Lock()
	defer s.im.mu.Unlock()
	return append([]OutboundMessage(nil), s.im.outbound...)
}

// OutboundReceipts counts how often xAgent sent each message id (a resend
// after a reconnect keeps its id).
func (s *Server) OutboundReceipts() map[string]int {
	s.im.mu.Lock()
	defer s.im.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.im.outSeen {
		out[k] = v
	}
	return out
}

// InboundAcks lists xAgent's chat.message.ack packets in order.
func (s *Server) InboundAcks() []InboundAck {
	s.im.mu.Lock()
	defer s.im.mu.Unlock()
	return append([]InboundAck(nil), s.im.acks...)
}

// Unacknowledged lists the injected messages xAgent has not acknowledged.
func (s *Server) Unacknowledged() []string {
	s.im.mu.Lock()
	defer s.im.mu.Unlock()
	var out []string
	for _, id := range s.im.order {
		if s.im.pending[id] != nil {
			out = append(out, id)
		}
	}
	return out
}
