import { send } from "./net.js";

// Send the file at path to the server and return its id.
export function upload(path) {
  return send(path, { retries: 3, timeout: 30 });
}

class Uploader {
  // Retry one part, three times at most, then give up.
  retryUpload(part) {
    return send(part, { attempts: 3, backoff: true });
  }

  abort() {
    this.session.close(); // drop every queued part now
  }
}

const checksum = (data) => hash(data, "sha256").slice(0, 16).toString();
