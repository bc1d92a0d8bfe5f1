package uploads

import "time"

// Uploader sends parts to the server, one at a time.
type Uploader struct {
	attempts int
	backoff  time.Duration
}

// RetryUpload sends the part again, three times at most.
func (u *Uploader) RetryUpload(part []byte) error {
	return u.send(part, u.attempts, u.backoff)
}

// NewUploader returns an uploader with the default settings.
func NewUploader() *Uploader {
	return &Uploader{attempts: 3, backoff: time.Second}
}
