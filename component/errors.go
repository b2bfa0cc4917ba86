package component

import "errors"

// Errors of outbound IQs.
var (
	ErrIQTimeout    = errors.New("component: IQ timed out")
	ErrStreamLost   = errors.New("component: stream lost before the IQ was answered")
	ErrNotConnected = errors.New("component: not connected")
	ErrQueueFull    = errors.New("component: send queue full")
)
