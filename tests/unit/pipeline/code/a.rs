use std::time::Duration;

/// Sends parts to the server, one at a time.
#[derive(Debug, Clone)]
pub struct Uploader {
    attempts: u32,
    backoff: Duration,
}

impl Uploader {
    /// Sends the part again, three times at most.
    pub fn retry_upload(&self, part: &[u8]) -> Result<(), Error> {
        self.send(part, self.attempts, self.backoff)
    }

    pub fn abort(&mut self) {
        self.queue.clear(); // drop every queued part now
    }
}

fn main() {
    let uploader = Uploader { attempts: 3, backoff: Duration::from_secs(1) };
}
