package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// UploadedFile is the POST /files/uploads answer (§5.1).
type UploadedFile struct {
	FileRef   string `json:"file_ref"`
	FileType  string `json:"file_type"`
	Filename  string `json:"filename"`
	ByteSize  int64  `json:"byte_size"`
	ExpiresAt int64  `json:"expires_at"`
}

const maxUploadReply = 64 << 10

// UploadFile sends one outbound file to the connector's Transfer Plane
// (POST /files/uploads, multipart field "file") bound to channelID, with
// the Bearer key, and returns the connector's file_ref. Redirects are not
// followed (Control.HTTP refuses them).
func (c *Control) UploadFile(ctx context.Context, channelID, name, mediaType string, data []byte) (*UploadedFile, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, quoteSafe(name)))
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	h.Set("Content-Type", mediaType)
	part, err := mw.CreatePart(h)
	if err != nil {
		return nil, err
	}
	part.Write(data)
	mw.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout*4)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wire.EndpointURL(c.Base, "/files/uploads"), &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-XAgent-Connector-Channel-ID", channelID)
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("connector /files/uploads: %s", c.Red.Scrub(NetReason(err)))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxUploadReply+1))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &HTTPError{Endpoint: "/files/uploads", Code: resp.StatusCode}
	}
	if len(raw) > maxUploadReply {
		return nil, errors.New("connector /files/uploads: answer too large")
	}
	var u UploadedFile
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, errors.New("connector /files/uploads: answer is not a JSON object")
	}
	if !wire.ValidWireID(u.FileRef) {
		return nil, errors.New("connector /files/uploads: file_ref is missing or malformed")
	}
	return &u, nil
}

func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == '\\' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}
